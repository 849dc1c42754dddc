package daytwo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// failingAfter: a step that failed this many times in a row is shown in
// the StepFailing condition (a single failure is usually a pod that
// restarted a moment ago).
const failingAfter = 3

var stepErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "cacheops_daytwo_step_errors_total",
	Help: "Day-two steps that failed, by step (the planned action, or the part of the reconcile before it) and reason (redis, timeout, network, api, other).",
}, []string{"step", "reason"})

// statusConflicts counts the status writes the API server refused because
// the CacheCluster changed since it was read (day-one, a backup stream, a
// person): the reconcile's changes are dropped and planned again on the
// fresh object 50 ms later. Each costs a reconcile, which on a loaded API
// server takes seconds. (In the scale benchmark's run 24 a failover's
// start was taken twice with no "Failover started" and no error after
// either, each try 3-4 s after the last: only a conflict ended a
// reconcile that silently.)
var statusConflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "cacheops_daytwo_status_conflicts_total",
	Help: "Day-two status writes refused because the CacheCluster changed since it was read, by step (the planned action).",
}, []string{"step"})

func init() { metrics.Registry.MustRegister(stepErrors, statusConflicts) }

// conflicted counts a status write refused for a conflict, and says so in
// the log at debug level.
func (r *Reconciler) conflicted(ctx context.Context, s *scope) {
	step := string(s.action.Type)
	if step == "" {
		step = s.failedStep
	}
	statusConflicts.WithLabelValues(step).Inc()
	ctrl.LoggerFrom(ctx).V(1).Info("The cluster changed since it was read: its status was not written, planning again", "action", s.action.String())
}

// failures remember, per cluster, the step that keeps failing.
type failures struct {
	mu sync.Mutex
	m  map[types.NamespacedName]failure
}

type failure struct {
	step  string
	count int
	since time.Time
}

// record counts one more failure of step and returns the run so far.
func (f *failures) record(key types.NamespacedName, step string, now time.Time) failure {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[types.NamespacedName]failure{}
	}
	cur := f.m[key]
	if cur.step != step {
		cur = failure{step: step, since: now}
	}
	cur.count++
	f.m[key] = cur
	return cur
}

func (f *failures) forget(key types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, key)
}

// stepFailed counts a failed step by step and reason, and shows a failure
// that persists in the StepFailing condition.
func (r *Reconciler) stepFailed(s *scope, err error) {
	name := s.failedStep
	if name == "act" {
		name = string(s.action.Type)
	}
	stepErrors.WithLabelValues(name, errorReason(err)).Inc()
	run := r.failing.record(s.key, name, r.now())
	if run.count < failingAfter {
		return
	}
	what := name
	if name == string(s.action.Type) {
		what = s.action.String()
	}
	msg := fmt.Sprintf("%s failed %d times in a row since %s; the last error: %v", what, run.count, run.since.UTC().Format(time.RFC3339), err)
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: cachev1alpha1.ConditionStepFailing, Status: metav1.ConditionTrue, Reason: cachev1alpha1.ReasonStepError,
			Message: truncate(msg, 1024), ObservedGeneration: s.cc.Generation,
		})
	})
}

// stepSucceeded clears a failure run and its condition.
func (r *Reconciler) stepSucceeded(s *scope) {
	r.failing.forget(s.key)
	if meta.FindStatusCondition(s.cc.Status.Conditions, cachev1alpha1.ConditionStepFailing) != nil {
		s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
			meta.RemoveStatusCondition(&st.Conditions, cachev1alpha1.ConditionStepFailing)
		})
	}
}

// errorReason classifies an error for the step error metric.
func errorReason(err error) string {
	var rerr redis.Error
	var nerr net.Error
	switch {
	case errors.As(err, &rerr):
		return "redis"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &nerr) && nerr.Timeout()):
		return "timeout"
	case errors.As(err, &nerr):
		return "network"
	case apierrors.ReasonForError(err) != metav1.StatusReasonUnknown:
		return "api"
	}
	return "other"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
