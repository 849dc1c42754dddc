package daytwo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/renderer"
)

// The operation steps: approving a spec for day-one to roll out, and the
// recorded operations that change a running cluster — scaling, rolling
// upgrades and their rollback, switchovers (plan/operations.go orders
// them). Configuration changes are in reconfigure.go, the upgrade
// pre-check in precheck.go.

// approveValues writes values to status.rollout, keeping the verdict on a
// blocked change.
func approveValues(st *cachev1alpha1.CacheClusterStatus, v cachev1alpha1.RolloutValues) {
	ro := &cachev1alpha1.RolloutStatus{RolloutValues: *v.DeepCopy()}
	if st.Rollout != nil {
		ro.Blocked = st.Rollout.Blocked
	}
	st.Rollout = ro
}

// block records why a change of spec is not rolled out, until spec changes.
func block(st *cachev1alpha1.CacheClusterStatus, target cachev1alpha1.RolloutValues, reason, msg string) {
	if st.Rollout == nil {
		return
	}
	st.Rollout = st.Rollout.DeepCopy()
	st.Rollout.Blocked = &cachev1alpha1.RolloutBlock{Target: renderer.ValuesKey(target), Reason: reason, Message: msg}
}

// approve lets day-one render the values (status.rollout).
func (r *Reconciler) approve(_ context.Context, s *scope, a plan.Action) error {
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) { approveValues(st, *a.Values) })
	return nil
}

// startOperation records an operation before its first step.
func (r *Reconciler) startOperation(ctx context.Context, s *scope, a plan.Action) error {
	now := metav1.NewTime(r.now())
	op := a.Operation.DeepCopy()
	op.ID, op.StartedAt, op.StepStartedAt = newID(), now, &now
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		st.Operation = op
		// spec moved on from a refused change: a later return to it is
		// tried again.
		if st.Rollout != nil && st.Rollout.Blocked != nil && op.Type != cachev1alpha1.OperationSwitchover {
			st.Rollout = st.Rollout.DeepCopy()
			st.Rollout.Blocked = nil
		}
	})
	s.then(func() {
		ctrl.LoggerFrom(ctx).Info("Operation started", "operation", op.ID, "type", op.Type, "reason", op.Reason)
	})
	s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventOperationStarted, string(op.Type), "%s %s: %s", op.Type, op.ID, op.Reason)
	return nil
}

// nextStep records the operation's next step.
func (r *Reconciler) nextStep(_ context.Context, s *scope, a plan.Action) error {
	op := a.Operation
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) { st.Operation = op })
	if op.Step == cachev1alpha1.StepSwitchover || op.Step == plan.StepRollbackSwitchover {
		s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventSwitchover, "Switchover", "%s %s: switchover %s→%s (%s)", op.Type, op.ID, op.FromPod, op.ToPod, a.Reason)
	}
	return nil
}

// completeOperation ends the operation; an upgrade that rolled back
// blocks its target until spec changes.
func (r *Reconciler) completeOperation(ctx context.Context, s *scope, a plan.Action) error {
	op := s.cc.Status.Operation
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		if a.Values != nil {
			approveValues(st, *a.Values)
		}
		st.Operation = nil
		if op != nil && op.Type == cachev1alpha1.OperationUpgrade && st.Rollout != nil {
			st.Rollout = st.Rollout.DeepCopy()
			st.Rollout.Blocked = nil
			if a.Operation != nil && a.Operation.Reason != "" && op.Target != nil {
				block(st, *op.Target, cachev1alpha1.ReasonUpgradeRolledBack,
					strings.TrimPrefix(a.Operation.Reason, "rollback: ")+". The pods run the previous template again; change spec (fix or revert it) to try again.")
			}
		}
	})
	if op == nil {
		return nil
	}
	took := r.now().Sub(op.StartedAt.Time).Round(time.Millisecond)
	s.then(func() {
		ctrl.LoggerFrom(ctx).Info("Operation completed", "operation", op.ID, "type", op.Type, "duration", took.String())
	})
	if op.Type == cachev1alpha1.OperationUpgrade && op.Step == cachev1alpha1.StepRollback {
		s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventRolledBack, string(op.Type), "%s %s rolled back in %s: %s", op.Type, op.ID, took, op.Reason)
	} else {
		s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventOperationDone, string(op.Type), "%s %s completed in %s: %s", op.Type, op.ID, took, op.Reason)
	}
	if op.Type == cachev1alpha1.OperationUpgrade {
		ns, name := s.cc.Namespace, s.cc.Name
		s.then(func() { upgradeDuration.WithLabelValues(ns, name).Observe(took.Seconds()) })
	}
	return nil
}

// restartPod deletes a pod so its StatefulSet makes it on the new
// template. The restart is recorded before it happens (its deadline starts
// now), and the live pod is read from the API server: the cache may not
// show a deletion made a moment ago, and a pod is restarted once, never
// its replacement.
func (r *Reconciler) restartPod(ctx context.Context, s *scope, a plan.Action) error {
	cc := s.cc
	live := &corev1.Pod{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: a.Pod}, live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if sp, ok := s.snap.Pod(a.Pod); !live.DeletionTimestamp.IsZero() || (ok && sp.UID != "" && sp.UID != live.UID) {
		return nil
	}
	op := cc.Status.Operation.DeepCopy()
	if op.Type != cachev1alpha1.OperationRestore {
		// (A restore recreates every pod made before its step began; that
		// time stays.)
		now := metav1.NewTime(r.now())
		op.StepStartedAt = &now
		s.status.set(func(st *cachev1alpha1.CacheClusterStatus) { st.Operation = op })
		if err := r.commit(ctx, &s.status); err != nil {
			return err
		}
	}
	uid := live.UID
	if err := r.Client.Delete(ctx, live, client.Preconditions{UID: &uid}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	r.expect.deletedPod(s.key, a.Pod, uid, r.now())
	ns, name := cc.Namespace, cc.Name
	s.then(func() { podRestarts.WithLabelValues(ns, name).Inc() })
	s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventPodRestarted, string(op.Type), "%s %s: restarting %s (%s)", op.Type, op.ID, a.Pod, a.Reason)
	return nil
}

// refuseChange records a change of spec the planner refused (a downgrade
// past the master's RDB format): day-one reports it as Stalled until spec
// changes; no pod is touched.
func (r *Reconciler) refuseChange(ctx context.Context, s *scope, a plan.Action) error {
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		block(st, *a.Values, cachev1alpha1.ReasonDowngradeRefused, a.Reason)
	})
	ctrl.LoggerFrom(ctx).Info("Change refused", "reason", a.Reason)
	s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventChangeRefused, "Refuse", "%s", a.Reason)
	return nil
}

// rollback approves the previous values again and records the rollback.
func (r *Reconciler) rollback(ctx context.Context, s *scope, a plan.Action) error {
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		approveValues(st, *a.Values)
		st.Operation = a.Operation
	})
	ctrl.LoggerFrom(ctx).Info("Rolling back", "operation", a.Operation.ID, "reason", a.Reason)
	s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventRolledBack, "Rollback", "%s %s: rolling back: %s", a.Operation.Type, a.Operation.ID, a.Reason)
	return nil
}

// gracefulSwitchover asks the master to hand its role to a.Pod (Redis
// FAILOVER TO: it pauses writes until the target has caught up, so no
// acknowledged write is lost).
func (r *Reconciler) gracefulSwitchover(ctx context.Context, s *scope, a plan.Action) error {
	from, _ := s.snap.Pod(a.Master)
	to, _ := s.snap.Pod(a.Pod)
	timeout := max(s.snap.ProbeTimeout, 5*time.Second)
	c := redisClient(from.IP, s.password)
	defer c.Close()
	err := c.Do(ctx, "FAILOVER", "TO", to.IP, "6379", "TIMEOUT", strconv.FormatInt(timeout.Milliseconds(), 10)).Err()
	if err != nil && !strings.Contains(err.Error(), "already in progress") {
		return fmt.Errorf("FAILOVER TO %s on %s: %w", a.Pod, a.Master, err)
	}
	r.mu.Lock()
	if r.issued == nil {
		r.issued = map[types.NamespacedName]time.Time{}
	}
	r.issued[s.key] = r.now()
	r.mu.Unlock()
	return nil
}

// endSwitchover records the switchover's outcome; a requested one takes
// its request annotation away once the outcome is stored, or it would
// start again.
func (r *Reconciler) endSwitchover(ctx context.Context, s *scope, a plan.Action) error {
	cc := s.cc
	op := cc.Status.Operation
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		if a.Pod != "" {
			setMaster(st, s.snap, a.Pod)
		}
		if a.Values != nil {
			approveValues(st, *a.Values) // an aborted upgrade rolls back
		}
		st.Operation = a.Operation
	})
	if err := r.commit(ctx, &s.status); err != nil {
		return err
	}
	r.mu.Lock()
	delete(r.issued, s.key)
	r.mu.Unlock()
	if _, requested := cc.Annotations[cachev1alpha1.AnnotationSwitchoverTo]; requested && op.Type == cachev1alpha1.OperationSwitchover {
		if err := r.removeSwitchoverRequest(ctx, cc); err != nil {
			return err
		}
	}
	if a.Pod == "" {
		s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventSwitchover, "Switchover", "%s %s: %s", op.Type, op.ID, a.Reason)
		return nil
	}
	took := r.now().Sub(op.StepStartedAt.Time).Round(time.Millisecond)
	ns, name := cc.Namespace, cc.Name
	s.then(func() { switchovers.WithLabelValues(ns, name).Inc() })
	s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventSwitchover, "Switchover", "%s %s: %s is the master (was %s), switchover took %s", op.Type, op.ID, a.Pod, a.Master, took)
	if a.Operation == nil {
		s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventOperationDone, string(op.Type), "%s %s completed: %s", op.Type, op.ID, op.Reason)
	}
	return nil
}

// clearSwitchoverRequest removes a switchover request that cannot be
// served (or needs no switchover), saying why.
func (r *Reconciler) clearSwitchoverRequest(ctx context.Context, s *scope, a plan.Action) error {
	if err := r.removeSwitchoverRequest(ctx, s.cc); err != nil {
		return err
	}
	s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventSwitchover, "Switchover", "Switchover request to %s removed: %s", a.Pod, a.Reason)
	return nil
}

func (r *Reconciler) removeSwitchoverRequest(ctx context.Context, cc *cachev1alpha1.CacheCluster) error {
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, cachev1alpha1.AnnotationSwitchoverTo))
	return client.IgnoreNotFound(r.Client.Patch(ctx, cc.DeepCopy(), client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)))
}
