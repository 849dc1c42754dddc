package daytwo

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// step is one named part of a day-two reconcile.
type step struct {
	name string
	run  func(ctx context.Context, s *scope) error
}

// scope carries one reconcile of one cluster from step to step: what it
// observed, what the planner decided, and the status changes to write.
type scope struct {
	cc       *cachev1alpha1.CacheCluster
	key      types.NamespacedName
	pods     []corev1.Pod
	password string
	backups  []cachev1alpha1.CacheBackup
	snap     plan.Snapshot
	action   plan.Action
	// nextBackup is how long until the schedule's next due time; zero
	// when none is.
	nextBackup time.Duration
	// status collects every status change of the reconcile; it is written
	// once, at the end (or before a step that must not run unrecorded).
	status statusWriter
	// done: a step ended the reconcile early, to look again after result.
	done   bool
	result ctrl.Result
	// acted: the planned step was taken.
	acted bool
	// failedStep names the step whose error ended the reconcile.
	failedStep string
}

func newScope(cc *cachev1alpha1.CacheCluster, rec events.EventRecorder) *scope {
	return &scope{cc: cc, key: client.ObjectKeyFromObject(cc), status: newStatusWriter(cc, rec)}
}

// stop ends the reconcile after this step, to look again after res.
func (s *scope) stop(res ctrl.Result) {
	s.done, s.result = true, res
}

// eventf records an Event about the cluster once the status written with
// it is stored: an Event never tells of a change the status lost.
func (s *scope) eventf(eventType, reason, action, note string, args ...any) {
	s.status.eventf(eventType, reason, action, note, args...)
}

// then runs f once the status is stored (metrics of a completed step).
func (s *scope) then(f func()) { s.status.after = append(s.status.after, f) }

// statusWriter collects the changes to day-two's part of a CacheCluster's
// status and writes them in one patch, guarded by the resourceVersion the
// object was read at (an optimistic lock: a change made meanwhile by
// day-one or by a backup stream is never overwritten).
type statusWriter struct {
	cc       *cachev1alpha1.CacheCluster
	original *cachev1alpha1.CacheCluster
	rec      events.EventRecorder
	after    []func()
}

func newStatusWriter(cc *cachev1alpha1.CacheCluster, rec events.EventRecorder) statusWriter {
	return statusWriter{cc: cc, original: cc.DeepCopy(), rec: rec}
}

// set changes the status in memory; later steps of the reconcile see it.
func (w *statusWriter) set(mutate func(*cachev1alpha1.CacheClusterStatus)) {
	mutate(&w.cc.Status)
}

func (w *statusWriter) eventf(eventType, reason, action, note string, args ...any) {
	cc := w.cc
	w.after = append(w.after, func() { w.rec.Eventf(cc, nil, eventType, reason, action, note, args...) })
}

// commit writes the collected changes, if any, then sends the Events and
// runs what waited for them. After a failed write nothing is sent and the
// changes are dropped with the reconcile.
func (r *Reconciler) commit(ctx context.Context, w *statusWriter) error {
	if !equality.Semantic.DeepEqual(w.original.Status, w.cc.Status) {
		patch := client.MergeFromWithOptions(w.original, client.MergeFromWithOptimisticLock{})
		if log := ctrl.LoggerFrom(ctx).V(1); log.Enabled() {
			data, _ := patch.Data(w.cc)
			log.Info("Patching status", "patch", string(data))
		}
		if err := r.Client.Status().Patch(ctx, w.cc, patch); err != nil {
			w.after = nil
			return err
		}
		r.expect.wroteStatus(w.cc)
		w.original = w.cc.DeepCopy()
	}
	after := w.after
	w.after = nil
	for _, f := range after {
		f()
	}
	return nil
}

// patchFreshStatus changes a cluster's status from outside a reconcile (a
// backup stream that ended) through the same writer, on a fresh read,
// retrying conflicts.
func (r *Reconciler) patchFreshStatus(ctx context.Context, key types.NamespacedName, mutate func(*cachev1alpha1.CacheCluster, *cachev1alpha1.CacheClusterStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cc := &cachev1alpha1.CacheCluster{}
		if err := r.APIReader.Get(ctx, key, cc); err != nil {
			return client.IgnoreNotFound(err)
		}
		w := newStatusWriter(cc, r.Recorder)
		w.set(func(st *cachev1alpha1.CacheClusterStatus) { mutate(cc, st) })
		return r.commit(ctx, &w)
	})
}
