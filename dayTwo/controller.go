package daytwo

import (
	"context"
	"errors"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

const (
	// ControllerName names the controller in logs, metrics and Events.
	ControllerName = "cachecluster-daytwo"
	// FieldManager owns the role label of the pods and the upgrade
	// pre-check pod and ConfigMap.
	FieldManager = "cacheops-daytwo"
	// defaultProbeTimeout is spec.highAvailability.probeTimeoutSeconds'
	// default.
	defaultProbeTimeout = 5 * time.Second
	// steadyRecheck re-plans a healthy cluster now and then, in case an
	// event was missed.
	steadyRecheck = 30 * time.Second
	// conflictRetry: the status changed under us; look again soon.
	conflictRetry = 50 * time.Millisecond
	// afterStep: plan the next step as soon as the last one is seen.
	afterStep = 10 * time.Millisecond
)

// Reconciler is the day-two controller of replication mode: it observes
// every pod's Redis through the Prober, asks the planner (plan.Next) for
// the next step and takes exactly one step per reconcile.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	Prober    *probe.Prober
	// Now is the clock; tests replace it.
	Now func() time.Time
	// RecreateAfter overrides how long a pod may stay not-Ready before it
	// is recreated; zero means max(5m, 60 x probe timeout).
	RecreateAfter time.Duration
	// RecommendAfter is how long memory pressure must last before a
	// capacity recommendation; zero means 5 minutes.
	RecommendAfter time.Duration
	// StepDeadline bounds an upgrade's pre-check and the time a restarted
	// pod may take to become ready and in sync before the upgrade is rolled
	// back; zero means 5 minutes.
	StepDeadline time.Duration
	// BackupStallTimeout is how long a backup attempt may make no
	// progress before it is aborted and retried; zero means
	// backup.DefaultStallTimeout.
	BackupStallTimeout time.Duration
	// Workers is how many clusters are reconciled at once; zero means
	// DefaultWorkers.
	Workers int
	// AfterStep, when set, is called after each step that succeeded. The
	// manager's --fault-exit-after-step uses it to crash at a chosen point
	// of an operation, so a test can prove a restarted operator finishes
	// the operation it recorded.
	AfterStep func(plan.Action)

	// Namespaces are the namespaces the manager's cache serves (nil:
	// every namespace); the Secrets' metadata cache serves the same.
	Namespaces map[string]cache.Config

	// secretVersions: the metadata of the Secrets of the namespaces
	// served, which says when a Secret a spec names changed (secrets.go).
	secretVersions cache.Cache

	mu       sync.Mutex
	pressure pressure
	// issued: when Redis FAILOVER was sent for a cluster's switchover.
	issued map[types.NamespacedName]time.Time
	// dataChecks: what the last data check of each pod found (datacheck.go).
	dataChecks map[types.NamespacedName]map[string]plan.DataCheck
	// verifyErrorsSince: when checking a cluster's restore first failed.
	verifyErrorsSince map[types.NamespacedName]time.Time
	// expect: our writes the cache has not shown yet.
	expect expectations
	// failing: the step of each cluster that keeps failing.
	failing failures
	// waits: the wait each cluster was last logged in.
	waits waits
	// backups: the dumps being streamed.
	backups backupRuns
	// clientTLS: the client side of TLS of each cluster with spec.tls,
	// kept while its CA bundle does not change (tls.go).
	clientTLS map[types.NamespacedName]clientTLS
	// served: the certificate each pod of a cluster was last seen
	// serving (tls.go).
	served map[types.NamespacedName]map[string]plan.ServedCert
	// manifests: the sharded backups restoring clusters read.
	manifests manifests
	// usersOnPods: the users last applied on each pod of a cluster with
	// spec.users (users.go).
	usersOnPods map[types.NamespacedName]map[string]appliedUsers
	// namedSecrets: what was read from the Secrets each cluster's spec
	// names, by "secret/key" (secrets.go).
	namedSecrets map[types.NamespacedName]map[string]secretRead
}

// Reconcile takes one step towards a healthy replication topology:
// observe, plan, act, and write what changed in the status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cc := &cachev1alpha1.CacheCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cc); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// An object that did not decode holds no spec to act on; day-one
	// reports it. Like a paused one, its pods are left as they are.
	if !cc.DeletionTimestamp.IsZero() || cc.Spec.Paused || cc.DecodeError != "" {
		if !cc.DeletionTimestamp.IsZero() {
			r.backups.abort(req.NamespacedName, errors.New("the cluster is being deleted"))
		}
		r.Prober.Forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	s := newScope(cc, r.Recorder)
	steps := []step{
		{"list pods", r.listPods},
		{"wait for our writes", r.awaitExpectations},
		{"read the access", r.readAccess},
		{"probe", r.observePods},
		{"apply users", r.applyUsers},
		{"observe the workload", r.observeWorkload},
		{"observe backups", r.observeBackups},
		{"observe the restore", r.observeRestore},
		{"schedule backups", r.scheduleBackups},
		{"plan", r.plan},
		{"report", r.report},
		{"act", r.act},
	}
	var stepErr error
	for _, st := range steps {
		if err := st.run(ctx, s); err != nil {
			stepErr = err
			s.failedStep = st.name
			break
		}
		if s.done {
			break
		}
	}
	res, err := r.finish(ctx, s, stepErr)
	routine := stepErr == nil && !s.acted && s.action.Type == plan.ActionNone
	return withPriority(s, res, routine), err
}

// finish writes the reconcile's status changes once and chooses when to
// look again: soon after a step (to see its effect), with backoff after an
// error, at the next backup or routine check otherwise.
func (r *Reconciler) finish(ctx context.Context, s *scope, stepErr error) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if apierrors.IsConflict(stepErr) {
		// The status changed under us: whatever else was collected is
		// planned again on the fresh object, not written on the stale one.
		r.conflicted(ctx, s)
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	if stepErr != nil {
		r.stepFailed(s, stepErr)
	}
	if err := r.commit(ctx, &s.status); err != nil {
		if apierrors.IsConflict(err) {
			r.conflicted(ctx, s)
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, errors.Join(stepErr, err)
	}
	switch {
	case stepErr != nil:
		// The rate limiter backs off; the error is counted and, when it
		// persists, shown in the StepFailing condition.
		return ctrl.Result{}, stepErr
	case s.acted:
		if r.AfterStep != nil {
			r.AfterStep(s.action)
		}
		r.refreshChanged(ctx, s)
		return ctrl.Result{RequeueAfter: afterStep}, nil
	case s.done:
		return s.result, nil
	}
	log.V(2).Info("Nothing to do")
	return ctrl.Result{RequeueAfter: steadyRecheck}, nil
}

// forget drops what this process remembers of a deleted cluster.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.backups.abort(key, errors.New("the cluster was deleted"))
	r.Prober.Forget(key)
	forgetMetrics(key)
	r.expect.forget(key)
	r.failing.forget(key)
	r.waits.ended(key)
	r.manifests.forget(key)
	r.mu.Lock()
	delete(r.namedSecrets, key)
	delete(r.issued, key)
	delete(r.dataChecks, key)
	delete(r.verifyErrorsSince, key)
	delete(r.clientTLS, key)
	delete(r.served, key)
	delete(r.usersOnPods, key)
	r.mu.Unlock()
}

// plan asks the planner for the next step.
func (r *Reconciler) plan(_ context.Context, s *scope) error {
	s.action = plan.Next(s.snap)
	return nil
}

// report keeps the status's reports in step with what was observed: the
// capacity recommendations, the Queued and ShardsReady conditions, and
// the address the master serves at.
func (r *Reconciler) report(_ context.Context, s *scope) error {
	cc := s.cc
	switch m, ok := s.snap.Pod(cc.Status.CurrentMaster); {
	case cc.Status.Operation != nil:
	case cc.IsSharded():
		r.recommendShards(s)
	case ok && m.Observed:
		r.recommend(s, m.Obs)
	}
	setQueued(s, plan.Queued(s.snap))
	setShardsReady(s)
	setCertificateLoaded(s)
	recordMasterAddress(s)
	return nil
}

// act takes the planned step, or ends the reconcile when there is none.
func (r *Reconciler) act(ctx context.Context, s *scope) error {
	a := s.action
	log := ctrl.LoggerFrom(ctx)
	switch a.Type {
	case plan.ActionNone:
		// Look again at the routine recheck, or sooner when a backup is
		// due or a pod not Ready is to be recreated.
		s.stop(ctrl.Result{RequeueAfter: recheckBy(steadyRecheck, s.snap.Now, plan.RecheckAt(s.snap))})
		if s.nextBackup > 0 && s.nextBackup < s.result.RequeueAfter {
			s.result.RequeueAfter = s.nextBackup
		}
		if t := plan.TLSRecheck(s.snap); t > 0 && t < s.result.RequeueAfter {
			// A pod waits for the kubelet to update its certificate.
			s.result.RequeueAfter = t
		}
		r.stepSucceeded(s)
		r.waits.ended(s.key)
		return nil
	case plan.ActionWait:
		kv := []any{"action", a.String()}
		if !a.Until.IsZero() {
			kv = append(kv, "until", a.Until.UTC().Format(time.StampMilli))
		}
		if r.waits.changed(s.key, a) {
			log.Info("Waiting", kv...)
		} else {
			log.V(1).Info("Waiting", kv...)
		}
		if a.Alert != "" {
			// The recorder folds repeats of the same Event into a count.
			s.eventf(corev1.EventTypeWarning, a.Alert, "Wait", "%s", a.Reason)
		}
		s.stop(ctrl.Result{RequeueAfter: waitRecheck(s, r.now())})
		return nil
	}
	if op := s.cc.Status.Operation; op != nil {
		log = log.WithValues("operation", op.ID)
	} else if a.Type == plan.ActionStartOperation {
		log = log.WithValues("operation", a.Operation.Type)
	}
	ctx = ctrl.LoggerInto(ctx, log)
	log.Info("Taking step", "action", a.String())
	if err := r.execute(ctx, s, a); err != nil {
		return err
	}
	s.acted = true
	r.stepSucceeded(s)
	r.waits.ended(s.key)
	return nil
}

// refreshChanged looks again at the pods whose Redis the step changed, so
// the next step is planned on its effect.
func (r *Reconciler) refreshChanged(ctx context.Context, s *scope) {
	a := s.action
	changed := map[plan.ActionType][]string{
		plan.ActionPromote: {a.Pod}, plan.ActionRepoint: {a.Pod}, plan.ActionFence: {a.Pod},
		plan.ActionGracefulSwitchover: {a.Pod, a.Master},
		plan.ActionClusterMeet:        {a.Pod, a.Master}, plan.ActionClusterAddSlots: {a.Pod},
		plan.ActionClusterReplicate: {a.Pod, a.Master},
		plan.ActionSlotsMigrating:   {a.Pod, a.Master}, plan.ActionMigrateKeys: {a.Pod, a.Master},
		plan.ActionSlotsAssign: append([]string{a.Pod, a.Master}, a.Pods...), plan.ActionClusterForget: {a.Pod}, plan.ActionClusterReset: {a.Pod},
		plan.ActionSlotsReimport: {a.Pod, a.Master}, plan.ActionShardFailover: {a.Pod, a.Master},
	}
	if a.Type == plan.ActionApplyConfig && s.cc.IsSharded() {
		// The nodes report their cluster parameters: the next plan must
		// see the values just set, not start the change again.
		for _, p := range s.snap.Pods {
			changed[a.Type] = append(changed[a.Type], p.Name)
		}
	}
	for _, name := range changed[a.Type] {
		if p, ok := s.snap.Pod(name); ok {
			r.Prober.Refresh(ctx, s.key, probe.Target{Pod: p.Name, IP: p.IP, Cluster: s.cc.IsSharded()}, s.snap.ProbeTimeout)
		}
	}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the controller: CacheClusters, their pods, and
// the prober's wake-ups.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder(ControllerName)
	}
	if r.Prober == nil {
		r.Prober = probe.NewProber()
	}
	if err := mgr.Add(stopProber{r.Prober}); err != nil {
		return err
	}
	if err := mgr.Add(&r.backups); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &cachev1alpha1.CacheCluster{}, secretRefIndex, secretRefs); err != nil {
		return err
	}
	if r.secretVersions == nil {
		c, err := newSecretVersions(mgr, r.Namespaces)
		if err != nil {
			return err
		}
		r.secretVersions = c
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{RateLimiter: stepRateLimiter(), MaxConcurrentReconciles: workers(r.Workers)}).
		// Spec changes, and the switchover request annotation.
		For(&cachev1alpha1.CacheCluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(clusterOf)).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(clusterOf)).
		// A disaster recovery waits for its restore ConfigMap.
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(clusterOf)).
		// A renewed certificate is loaded into the pods.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(clusterOf)).
		Watches(&cachev1alpha1.CacheBackup{}, handler.EnqueueRequestsFromMapFunc(backupsOf)).
		WatchesRawSource(source.Channel(r.Prober.Events(), wakeHandler())).
		// A Secret a spec names (a user's password) changed.
		WatchesRawSource(source.Kind[client.Object](r.secretVersions, secretMeta(), handler.EnqueueRequestsFromMapFunc(r.clustersNaming))).
		Complete(r)
}

// DefaultWorkers is the day-two controller's default number of
// concurrent reconciles. A reconcile waits on Redis (a step, a look at its
// effect) more than it computes, so a few run at once even on two cores.
const DefaultWorkers = 4

func workers(n int) int {
	if n > 0 {
		return n
	}
	return DefaultWorkers
}

// stepRateLimiter backs a failing step off exponentially, from 50 ms to
// 10 s: a failover step that fails is retried soon, one that keeps
// failing does not hammer Redis or the API server. The prober's wake-ups
// still reconcile at once when a pod changes.
func stepRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](50*time.Millisecond, 10*time.Second)
}

// clusterOf maps a pod, a pre-check pod or a StatefulSet to its
// CacheCluster.
func clusterOf(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[cachev1alpha1.LabelCluster]
	if name == "" {
		name = o.GetLabels()[cachev1alpha1.LabelPrecheck]
	}
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

// stopProber ends all probing when the manager stops.
type stopProber struct{ p *probe.Prober }

func (s stopProber) Start(ctx context.Context) error {
	<-ctx.Done()
	s.p.Stop()
	return nil
}
