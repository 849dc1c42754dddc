package daytwo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cacheops/cacheops/dayTwo/access"
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/renderer"
	ctrl "sigs.k8s.io/controller-runtime"
)

// applyConfigStep sets spec.config's live parameters on every pod. What
// Redis answers decides the outcome: applied (and checked with CONFIG
// GET); refused as a value (the change is blocked with Redis's words,
// nothing restarts); refused as a parameter it will not change while it
// runs (the change becomes a rolling restart, pre-check first).
func (r *Reconciler) applyConfigStep(ctx context.Context, s *scope, a plan.Action) error {
	op := s.cc.Status.Operation
	mismatches, err := r.applyConfig(ctx, s.snap, a.Config, s.access)
	var refused refusedError
	switch {
	case errors.As(err, &refused) && !refused.needsRestart():
		// The value itself is wrong (or the parameter unknown to this
		// version): a restart would only crash the pods on it.
		msg := fmt.Sprintf("Redis refuses spec.config: %v. No pod was restarted and the pods keep their parameters; fix spec.config to try again.", err)
		s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
			block(st, *op.Target, cachev1alpha1.ReasonInvalidConfig, msg)
			st.Operation = nil
		})
		ctrl.LoggerFrom(ctx).Info("Redis refused the configuration", "operation", op.ID, "error", err.Error())
		s.eventf(corev1.EventTypeWarning, cachev1alpha1.ReasonInvalidConfig, "Reconfigure", "%s %s: %s", op.Type, op.ID, msg)
		return nil
	case errors.As(err, &refused):
		// The pre-check catches a value Redis refuses at start-up too.
		now := metav1.NewTime(r.now())
		next := op.DeepCopy()
		next.Type, next.Step, next.StepStartedAt, next.RestartAll = cachev1alpha1.OperationUpgrade, cachev1alpha1.StepPrecheck, &now, true
		next.Previous = s.snap.Approved.DeepCopy()
		next.Reason = strings.TrimSuffix(op.Reason, ": applied live, no restart") + ": rolling restart (" + err.Error() + ")"
		s.status.set(func(st *cachev1alpha1.CacheClusterStatus) { st.Operation = next })
		s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventConfigApplied, "Reconfigure", "%s %s: Redis refused it live (%v); rolling the pods instead", op.Type, op.ID, err)
		return nil
	case err != nil:
		// A pod did not answer: try again (pods already set keep the
		// value, which is the one asked for).
		return err
	}
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		approveValues(st, *a.Values)
		st.Operation = nil
	})
	s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventConfigApplied, "Reconfigure", "%s %s: %s on %d pods, checked with CONFIG GET", op.Type, op.ID, a.Reason, len(s.snap.Pods))
	for _, m := range mismatches {
		s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventConfigApplied, "Reconfigure", "%s", m)
	}
	return nil
}

// refusedError is Redis refusing a CONFIG SET (an error reply), as opposed
// to a pod that did not answer.
type refusedError struct{ error }

// needsRestart tells a parameter Redis will not change while it runs
// ("can't set immutable config", "can't set protected config") from a value
// it refuses outright.
func (e refusedError) needsRestart() bool {
	msg := e.Error()
	return strings.Contains(msg, "immutable config") || strings.Contains(msg, "protected config")
}

// applyConfig sets the parameters on every pod with one CONFIG SET (Redis
// applies them all or none), then reads them back. A value Redis reports
// differently (it normalises some) is returned as a mismatch to report.
func (r *Reconciler) applyConfig(ctx context.Context, snap plan.Snapshot, params map[string]string, acc access.Config) ([]string, error) {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := []any{"CONFIG", "SET"}
	for _, k := range keys {
		args = append(args, k, params[k])
	}
	var mismatches []string
	for _, p := range snap.Pods {
		if p.Deleting || p.IP == "" {
			continue
		}
		c := redisClient(p.IP, acc)
		err := c.Do(ctx, args...).Err()
		var rerr redis.Error
		if errors.As(err, &rerr) {
			err = refusedError{fmt.Errorf("%s: %w", p.Name, err)}
		}
		if err == nil {
			for _, k := range keys {
				got, gerr := c.ConfigGet(ctx, k).Result()
				if gerr != nil {
					err = gerr
					break
				}
				if !renderer.SameParam(got[k], params[k]) {
					mismatches = append(mismatches, fmt.Sprintf("%s: CONFIG GET %s returns %q after setting %q", p.Name, k, got[k], params[k]))
				}
			}
		}
		_ = c.Close()
		if err != nil {
			return nil, err
		}
	}
	return mismatches, nil
}
