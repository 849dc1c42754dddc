package daytwo

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// The topology steps: the first master, a failover (plan/failover.go
// orders them), fencing, the role labels the Services select, and the
// recreation of a wedged pod.

// bootstrap records the first master.
func (r *Reconciler) bootstrap(_ context.Context, s *scope, a plan.Action) error {
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) { setMaster(st, s.snap, a.Pod) })
	s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventMasterElected, "Bootstrap", "%s is the master", a.Pod)
	return nil
}

// refresh probes the pods the planner needs a fresh look at, at once; the
// next reconcile plans on what they answer.
func (r *Reconciler) refresh(ctx context.Context, s *scope, a plan.Action) error {
	var wg sync.WaitGroup
	for _, name := range a.Pods {
		p, ok := s.snap.Pod(name)
		if !ok || p.IP == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Prober.Refresh(ctx, s.key, probe.Target{Pod: p.Name, IP: p.IP, Cluster: s.cc.IsSharded()}, s.snap.ProbeTimeout)
		}()
	}
	wg.Wait()
	return nil
}

// lastLook starts the last look at the master before a failover
// (plan.planMasterDown), in the background; its end wakes the controller,
// and reportAnsweredLooks tells of a master that answered it.
func (r *Reconciler) lastLook(_ context.Context, s *scope, a plan.Action) error {
	p, ok := s.snap.Pod(a.Pod)
	if !ok || p.IP == "" {
		return fmt.Errorf("pod %s has no address", a.Pod)
	}
	r.Prober.Look(s.key, probe.Target{Pod: p.Name, IP: p.IP, Cluster: s.cc.IsSharded()}, s.snap.ProbeTimeout)
	if a.MasterSlow {
		// An action of its own: Events of the same reason, action and
		// object are merged into the first one's message.
		s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventMasterSlow, "LookAgain", "%s", a.Reason)
	}
	return nil
}

// reportAnsweredLooks tells of the masters that answered their last look
// before a failover: slow, not down, and still master. A replica's look
// (one that did not answer while a restarted master was judged) that
// answered is no averted failover, and is not reported.
func (r *Reconciler) reportAnsweredLooks(s *scope) {
	for _, pod := range r.Prober.TakeAnsweredLooks(s.key) {
		if pod != s.snap.CurrentMaster {
			continue
		}
		failoversAverted.WithLabelValues(s.key.Namespace, s.key.Name).Inc()
		s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventMasterSlow, "Probe",
			"%s missed its probes for more than %s but answered a look that waited %s: not failed over", pod, s.snap.ProbeTimeout, s.snap.ProbeTimeout)
	}
}

// startFailover records the failover (from, to) before any step of it; a
// backup stream in progress is aborted.
func (r *Reconciler) startFailover(ctx context.Context, s *scope, a plan.Action) error {
	cur := s.cc.Status.Operation
	if cur != nil && cur.Type == cachev1alpha1.OperationBackup {
		r.backups.abort(s.key, errFailover)
	}
	op := &cachev1alpha1.OperationStatus{
		ID: newID(), Type: cachev1alpha1.OperationFailover, FromPod: a.Master, ToPod: a.Pod,
		Reason: a.Reason, StartedAt: metav1.NewTime(r.now()),
	}
	if cur != nil {
		// A new target for the same failover (or a failover taking over a
		// backup's record) keeps the ID and the start.
		op.ID, op.StartedAt = cur.ID, cur.StartedAt
	}
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) { st.Operation = op })
	s.then(func() {
		ctrl.LoggerFrom(ctx).Info("Failover started", "operation", op.ID, "from", a.Master, "to", a.Pod, "reason", a.Reason)
	})
	s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventFailoverStarted, "Failover", "Failover %s: %s; promoting %s", op.ID, a.Reason, a.Pod)
	return nil
}

func (r *Reconciler) unlabel(ctx context.Context, s *scope, a plan.Action) error {
	return r.setRole(ctx, s, a.Pod, "")
}

func (r *Reconciler) labelMaster(ctx context.Context, s *scope, a plan.Action) error {
	return r.setRole(ctx, s, a.Pod, cachev1alpha1.RoleMaster)
}

func (r *Reconciler) labelReplica(ctx context.Context, s *scope, a plan.Action) error {
	return r.setRole(ctx, s, a.Pod, cachev1alpha1.RoleReplica)
}

// promote makes the pod a master (REPLICAOF NO ONE).
func (r *Reconciler) promote(ctx context.Context, s *scope, a plan.Action) error {
	p, _ := s.snap.Pod(a.Pod)
	return replicaOf(ctx, p.IP, s.access, "NO", "ONE")
}

// repoint makes a pod follow a.Master.
func (r *Reconciler) repoint(ctx context.Context, s *scope, a plan.Action) error {
	p, _ := s.snap.Pod(a.Pod)
	m, ok := s.snap.Pod(a.Master)
	if !ok || m.IP == "" {
		return fmt.Errorf("master %s has no address", a.Master)
	}
	return replicaOf(ctx, p.IP, s.access, m.IP, "6379")
}

// fence makes a pod that believes it is master a replica of the real one
// and drops its client connections: clients still connected to it (a
// Service's endpoints change, open connections stay) would write to a
// replica; dropped, they reconnect to the master.
func (r *Reconciler) fence(ctx context.Context, s *scope, a plan.Action) error {
	if err := r.repoint(ctx, s, a); err != nil {
		return err
	}
	p, _ := s.snap.Pod(a.Pod)
	if err := killClients(ctx, p.IP, s.access); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Dropping the client connections of a fenced pod", "pod", a.Pod)
	}
	s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventFenced, "Fence", "%s believed it was master; made it a replica of %s and dropped its client connections", a.Pod, a.Master)
	return nil
}

// recreate deletes a pod that stayed not-Ready too long; its StatefulSet
// makes it again on the same volume.
func (r *Reconciler) recreate(ctx context.Context, s *scope, a plan.Action) error {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.cc.Namespace, Name: a.Pod}}
	if err := client.IgnoreNotFound(r.Client.Delete(ctx, p)); err != nil {
		return err
	}
	if sp, ok := s.snap.Pod(a.Pod); ok {
		r.expect.deletedPod(s.key, a.Pod, sp.UID, r.now())
	}
	s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventPodRecreated, "Recreate", "Deleted %s (%s); its StatefulSet recreates it on the same volume", a.Pod, a.Reason)
	return nil
}

// completeFailover records the new master and ends the operation.
func (r *Reconciler) completeFailover(ctx context.Context, s *scope, a plan.Action) error {
	op := s.cc.Status.Operation
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		setMaster(st, s.snap, a.Pod)
		st.Operation = nil
	})
	took := r.now().Sub(op.StartedAt.Time)
	ns, name := s.cc.Namespace, s.cc.Name
	s.then(func() {
		failovers.WithLabelValues(ns, name).Inc()
		failoverDuration.WithLabelValues(ns, name).Observe(took.Seconds())
		ctrl.LoggerFrom(ctx).Info("Failover completed", "from", op.FromPod, "to", a.Pod, "duration", took.String())
	})
	s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventFailoverCompleted, "Failover", "Failover %s completed: %s→%s in %s", op.ID, op.FromPod, a.Pod, took.Round(time.Millisecond))
	return nil
}

// setRole sets (or, with "", removes) a pod's role label with a merge
// patch under our own field manager, and expects the cache to show it
// before the cluster is planned again.
func (r *Reconciler) setRole(ctx context.Context, s *scope, pod, role string) error {
	value := "null"
	if role != "" {
		value = fmt.Sprintf("%q", role)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, cachev1alpha1.LabelRole, value))
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.cc.Namespace, Name: pod}}
	if err := r.Client.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.expect.wrotePod(s.key, p, r.now())
	return nil
}

// setMaster records pod as the master, with the address it has now: the
// address its replicas are pointed at.
func setMaster(st *cachev1alpha1.CacheClusterStatus, snap plan.Snapshot, pod string) {
	st.CurrentMaster = pod
	if p, ok := snap.Pod(pod); ok {
		st.CurrentMasterAddress = p.IP
	}
}

// recordMasterAddress keeps status.currentMasterAddress at the address the
// recorded master serves writes at: once Redis reports it master there
// (promoted by day-two, after planMasterLacksData found nothing missing).
// A master whose pod comes back with another IP starts as a replica of
// nobody and is not recorded until then, so its replicas, which follow
// the old address, are still counted as its replicas when it is judged.
func recordMasterAddress(s *scope) {
	if s.snap.Sharded != nil {
		return
	}
	m, ok := s.snap.Pod(s.cc.Status.CurrentMaster)
	if !ok || !m.Observed || !m.Obs.Reachable || m.Obs.Role != "master" || m.IP == "" || m.IP == s.cc.Status.CurrentMasterAddress {
		return
	}
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) { st.CurrentMasterAddress = m.IP })
}
