package daytwo

import (
	"context"
	"errors"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/access"
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/dayTwo/probe"
	"github.com/cacheops/cacheops/renderer"
)

// The observe steps fill the scope's snapshot: everything the planner
// decides on, read from the cache and from the prober, never from a
// command that changes anything.

// listPods reads the cluster's pods from the cache.
func (r *Reconciler) listPods(ctx context.Context, s *scope) error {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(s.cc.Namespace), client.MatchingLabels{cachev1alpha1.LabelCluster: s.cc.Name}); err != nil {
		return err
	}
	s.pods = pods.Items
	return nil
}

// accessRetry is when a cluster whose password or certificate could not
// be read is looked at again: at the routine recheck when a Secret is
// missing (its creation wakes the cluster sooner), soon after an error
// reading it.
func accessRetry(err error) time.Duration {
	var missing missingSecret
	if errors.As(err, &missing) {
		return steadyRecheck
	}
	return 2 * time.Second
}

// readAccess reads how to reach the cluster's Redis: its password and,
// with spec.tls, the CAs and name its certificate is checked against
// (and the certificate the pods must serve). Without them nothing can be
// probed, so the reconcile waits: for a Secret that is not there yet,
// on the watches, which wake the cluster when it is created or changed
// (its own labelled Secrets through the cache, the Secrets its spec names
// through secrets.go), with the routine recheck as a fallback. Before, it
// looked again every 2 s: at 300 clusters created at once, day-two ran
// 71 reconciles a second, and the 113 clusters day-one had not rendered
// yet account for about 56 of them (computed: 113 every 2 s; the
// reconciles were not counted by cause; docs/scale.md).
func (r *Reconciler) readAccess(ctx context.Context, s *scope) error {
	pw, err := r.password(ctx, s.cc)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Password not available yet", "reason", err.Error())
		s.stop(ctrl.Result{RequeueAfter: accessRetry(err)})
		return nil
	}
	s.access = access.Config{Password: pw}
	if renderer.UsersEnabled(s.cc) && meta.FindStatusCondition(s.cc.Status.Conditions, cachev1alpha1.ConditionUsersApplied) != nil {
		// The default user is off: the operator is a user of its own,
		// with the cluster's password and only the commands it sends.
		// Only once the users were applied (UsersApplied is set): the
		// pods of a running cluster that gets its first users know only
		// the default user until then, and a prober that could not
		// authenticate would see every pod down.
		s.access.Username = cachev1alpha1.OperatorUser
	}
	if renderer.TLSEnabled(s.cc) {
		cfg, leaf, err := r.certificateOf(ctx, s.cc)
		if err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("TLS certificate not available yet", "reason", err.Error())
			s.stop(ctrl.Result{RequeueAfter: accessRetry(err)})
			return nil
		}
		s.access.TLS, s.certificate = cfg, leaf
	}
	return nil
}

// observePods keeps the prober on the pods that have an address and puts
// each pod, with what its last probe saw, in the snapshot.
func (r *Reconciler) observePods(_ context.Context, s *scope) error {
	cc := s.cc
	timeout := probeTimeout(cc)
	var targets []probe.Target
	for _, p := range s.pods {
		if p.Status.PodIP != "" && p.DeletionTimestamp.IsZero() {
			t := probe.Target{Pod: p.Name, IP: p.Status.PodIP, Cluster: cc.IsSharded()}
			if t.Cluster {
				t.Shard = int(cc.ShardOf(int32((plan.PodState{Name: p.Name}).Ordinal())))
			}
			targets = append(targets, t)
		}
	}
	r.Prober.Ensure(cc, targets, s.access, probePeriod(timeout))
	if ro := cc.Status.Rollout; ro != nil {
		// Ordinals scaled away are forgotten: a pod made there later
		// starts on a new volume, which is no loss.
		r.Prober.ForgetRuns(s.key, func(pod string) bool { return (plan.PodState{Name: pod}).Ordinal() < int(ro.Replicas) })
	}
	obs := r.Prober.Observations(s.key)
	states := make([]plan.PodState, 0, len(s.pods))
	for i := range s.pods {
		states = append(states, podState(&s.pods[i], obs))
	}
	recordMetrics(s.key, cc.Status.CurrentMaster, states)
	s.snap = r.snapshot(cc, states, timeout)
	r.reportAnsweredLooks(s)
	if s.certificate != nil {
		s.snap.TLS = r.tlsSnapshot(s.key, s.certificate)
	}
	return nil
}

// podState is one pod as the planner sees it.
func podState(p *corev1.Pod, obs map[string]probe.Observation) plan.PodState {
	o, seen := obs[p.Name]
	st := plan.PodState{
		Name: p.Name, UID: p.UID, IP: p.Status.PodIP, RoleLabel: p.Labels[cachev1alpha1.LabelRole],
		Deleting: !p.DeletionTimestamp.IsZero(), Observed: seen && o.IP == p.Status.PodIP, Obs: o,
		Revision: p.Labels[appsv1.ControllerRevisionHashLabelKey], Created: p.CreationTimestamp.Time,
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue && p.Status.Phase == corev1.PodRunning {
			st.NotReadySince = c.LastTransitionTime.Time
		}
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			st.Ready = true
		}
	}
	return st
}

// snapshot is the cluster's part of the snapshot: its spec, status and
// the operator's settings.
func (r *Reconciler) snapshot(cc *cachev1alpha1.CacheCluster, pods []plan.PodState, timeout time.Duration) plan.Snapshot {
	snap := plan.Snapshot{
		Name: cc.Name, Now: r.now(), ProbeTimeout: timeout,
		AutoFailover:  autoFailover(cc),
		CurrentMaster: cc.Status.CurrentMaster,
		MasterAddress: cc.Status.CurrentMasterAddress,
		Operation:     cc.Status.Operation,
		Pods:          pods,
		RecreateAfter: r.recreateAfter(timeout),
		Spec:          renderer.SpecValues(cc),
		SwitchoverTo:  cc.Annotations[cachev1alpha1.AnnotationSwitchoverTo],
		StepDeadline:  r.stepDeadline(),
		RestorePending: cc.Spec.Restore != nil &&
			meta.FindStatusCondition(cc.Status.Conditions, cachev1alpha1.ConditionRestored) == nil,
	}
	if cc.IsSharded() {
		snap.Sharded = &plan.ShardedState{Shards: int(cc.ShardCount()), PodsPerShard: int(cc.PodsPerShard()), Recorded: cc.Status.Shards,
			Parameters: renderer.ClusterParameters(cc)}
	}
	if ro := cc.Status.Rollout; ro != nil {
		snap.Approved = ro.RolloutValues.DeepCopy()
		snap.Blocked = ro.Blocked
	}
	if cc.Status.Operation != nil {
		snap.DataChecks = r.dataChecksOf(client.ObjectKeyFromObject(cc))
	}
	if plan.InSwitchover(cc.Status.Operation) {
		r.mu.Lock()
		snap.SwitchoverIssuedAt = r.issued[client.ObjectKeyFromObject(cc)]
		r.mu.Unlock()
	}
	return snap
}

// observeWorkload adds the StatefulSet and the pre-check pod to the
// snapshot.
func (r *Reconciler) observeWorkload(ctx context.Context, s *scope) error {
	cc, snap := s.cc, &s.snap
	sts := &appsv1.StatefulSet{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: cc.Name}, sts)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		st := &plan.StatefulSetState{
			Settled:        sts.Status.ObservedGeneration == sts.Generation && sts.Status.UpdateRevision != "",
			TemplateKey:    templateKeyOf(&sts.Spec.Template),
			UpdateRevision: sts.Status.UpdateRevision,
		}
		if sts.Spec.Replicas != nil {
			st.Replicas = *sts.Spec.Replicas
		}
		for _, c := range sts.Spec.Template.Spec.InitContainers {
			if c.Name == "restore" {
				st.RestoreInit = true
			}
		}
		snap.StatefulSet = st
	}

	pod := &corev1.Pod{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: renderer.PrecheckName(cc)}, pod)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case pod.DeletionTimestamp.IsZero():
		snap.Precheck = r.observePrecheck(ctx, s, pod)
	}
	return nil
}
