package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

const (
	// FieldManager owns every field the day-one controller applies.
	FieldManager = "cacheops"
	// ControllerName names the controller in logs, metrics and Events.
	ControllerName = "cachecluster-dayone"

	// stalledRetry is how often a Stalled cluster is looked at again when no
	// watched object changes, e.g. while a referenced Secret is missing.
	stalledRetry = 30 * time.Second
	// conflictRetry is the pause before reconciling again after a write
	// conflict, long enough for the cache to catch up.
	conflictRetry = 200 * time.Millisecond
)

// Reconciler is the day-one controller: it renders a CacheCluster with the
// embedded chart, applies the objects with server-side apply, prunes what is
// no longer rendered and reports the children's health in the status.
type Reconciler struct {
	Client client.Client
	// APIReader reads around the cache, for the few objects that must not be
	// decided on a stale read (the generated password).
	APIReader client.Reader
	Renderer  *renderer.Renderer
	Recorder  events.EventRecorder
	// Capabilities tells the renderer what the cluster serves.
	Capabilities CapabilitiesSource
	// Workers is how many CacheClusters are reconciled at once; zero
	// means DefaultWorkers.
	Workers int
	// TLSCADuration is the lifetime of the CA the operator keeps for a
	// cluster with spec.tls and no issuer; zero means DefaultCADuration.
	TLSCADuration time.Duration

	// known: the versions of the children known to hold the rendering
	// (apply.go).
	known knownVersions
}

// DefaultWorkers is the day-one controller's default number of concurrent
// reconciles: rendering is CPU work, applying waits on the API server.
// Measured at 300 new clusters on the control plane alone (docs/scale.md):
// create -> first status max 36.9 s with 2, 28.7 s with 4, 22.6 s with 8;
// beside other CPU-bound work 8 was slower than 2 (129.7 against 75 s),
// so 4, between the two.
const DefaultWorkers = 4

// scope carries what one reconcile learned, from step to step.
type scope struct {
	cc          *cachev1alpha1.CacheCluster
	desired     []*unstructured.Unstructured
	stalled     *stall
	applied     []string
	pruned      []string
	statefulSet *appsv1.StatefulSet
	pods        []corev1.Pod
	children    []childHealth
	requeue     time.Duration
	// failedStep names the step whose error ended the reconcile.
	failedStep string
	// now is the reconcile's clock reading, for judgements over time.
	now time.Time
}

// stall is a problem only a change by a person can fix.
type stall struct {
	reason  string
	message string
}

func (s *stall) Error() string { return s.message }

// step is one named part of a reconcile.
type step struct {
	name string
	run  func(ctx context.Context, s *scope) error
}

// Reconcile moves one CacheCluster towards its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	log := ctrl.LoggerFrom(ctx)
	start := time.Now()
	defer func() { observeReconcile(ControllerName, start, retErr) }()

	cc := &cachev1alpha1.CacheCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	if cc.DecodeError != "" {
		return ctrl.Result{}, r.reconcileUndecodable(ctx, cc)
	}
	if !cc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, cc)
	}

	if !controllerutil.ContainsFinalizer(cc, cachev1alpha1.Finalizer) {
		patch := client.MergeFrom(cc.DeepCopy())
		controllerutil.AddFinalizer(cc, cachev1alpha1.Finalizer)
		if err := r.Client.Patch(ctx, cc, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	original := cc.DeepCopy()
	if cc.Spec.Paused {
		// Nothing is rendered or applied, but the status says the pause was
		// seen, so Argo CD reports Suspended instead of waiting for it.
		if cc.Status.ObservedGeneration != cc.Generation {
			log.Info("Cluster is paused; not reconciling")
			r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.ReasonPaused, "Pause", "Paused: the operator changes nothing until spec.paused is unset")
		}
		cc.Status.ObservedGeneration = cc.Generation
		removeCondition(cc, cachev1alpha1.ConditionReconciling)
		return ctrl.Result{}, r.patchStatus(ctx, original, cc)
	}

	s := &scope{cc: cc, now: time.Now()}
	steps := []step{
		{"auth", r.ensureAuthSecret},
		{"tls", r.ensureTLS},
		{"backup", r.checkBackup},
		{"render", r.render},
		{"apply", r.apply},
		{"prune", r.prune},
		{"observe", r.observe},
	}
	var stepErr error
	for _, st := range steps {
		if err := st.run(ctx, s); err != nil {
			var stl *stall
			if errors.As(err, &stl) {
				s.stalled = stl
				break
			}
			stepErr = fmt.Errorf("%s: %w", st.name, err)
			s.failedStep = st.name
			break
		}
	}

	summarize(s, stepErr)
	if stepErr == nil {
		cc.Status.ObservedGeneration = cc.Generation
	}
	if err := r.patchStatus(ctx, original, cc); err != nil {
		if apierrors.IsConflict(err) && stepErr == nil {
			// The cache was behind a write; look again with fresh data.
			log.V(1).Info("Status changed meanwhile; reconciling again")
			return ctrl.Result{RequeueAfter: jitter(conflictRetry)}, nil
		}
		return ctrl.Result{}, errors.Join(stepErr, err)
	}

	switch {
	case stepErr != nil:
		r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, "ReconcileFailed", "Reconcile", "%v", stepErr)
		return ctrl.Result{}, stepErr
	case s.stalled != nil:
		if original.Status.Phase != cachev1alpha1.PhaseFailed || conditionMessage(original, cachev1alpha1.ConditionStalled) != s.stalled.message {
			r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, s.stalled.reason, "Reconcile", "%s", s.stalled.message)
		}
		log.Info("Cluster is stalled", "reason", s.stalled.reason, "message", s.stalled.message)
		return ctrl.Result{RequeueAfter: jitter(stalledRetry)}, nil
	}
	if cc.Status.Phase == cachev1alpha1.PhaseFailed && original.Status.Phase != cachev1alpha1.PhaseFailed {
		r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonMajorityDown, "Reconcile", "%s", conditionMessage(cc, cachev1alpha1.ConditionDegraded))
	}
	if cc.Status.Phase == cachev1alpha1.PhaseDegraded {
		// Look again when a Degraded cluster may have to be called Failed.
		return ctrl.Result{RequeueAfter: jitter(MajorityDownAfter / 4)}, nil
	}
	if s.requeue > 0 {
		return ctrl.Result{RequeueAfter: jitter(s.requeue)}, nil
	}
	return ctrl.Result{}, nil
}

// checkBackup stalls a cluster whose backup schedule does not parse (what
// CEL can check was refused at admission), and resolves spec.restore.backup
// to the dump it names, once, into status.restoreFrom.
func (r *Reconciler) checkBackup(ctx context.Context, s *scope) error {
	cc := s.cc
	if cc.Spec.Backup.Enabled {
		if _, err := cachev1alpha1.ParseSchedule(cc.Spec.Backup.Schedule); err != nil {
			return &stall{reason: cachev1alpha1.ReasonInvalidBackupSchedule, message: err.Error()}
		}
	}
	rs := cc.Spec.Restore
	if rs == nil || rs.Backup == "" || cc.Status.RestoreFrom != nil {
		return nil
	}
	cb := &cachev1alpha1.CacheBackup{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: rs.Backup}, cb); err != nil {
		if apierrors.IsNotFound(err) {
			return &stall{reason: cachev1alpha1.ReasonRestoreSourceNotReady, message: fmt.Sprintf(
				"spec.restore.backup: no CacheBackup %q in namespace %s; name a completed one, or restore by key (spec.restore.key with spec.restore.s3 or spec.restore.pvc)", rs.Backup, cc.Namespace)}
		}
		return err
	}
	if cb.DecodeError != "" {
		return &stall{reason: cachev1alpha1.ReasonRestoreSourceNotReady, message: fmt.Sprintf(
			"spec.restore.backup: CacheBackup %s cannot be read: %s", rs.Backup, cb.DecodeError)}
	}
	if cb.Status.Phase != cachev1alpha1.BackupCompleted || cb.Status.Location == nil {
		return &stall{reason: cachev1alpha1.ReasonRestoreSourceNotReady, message: fmt.Sprintf(
			"spec.restore.backup: CacheBackup %s is %s, not Completed; the cluster starts when it completes", rs.Backup, orPending(cb.Status.Phase))}
	}
	if msg := shardLayoutMismatch(cc, cb); msg != "" {
		return &stall{reason: cachev1alpha1.ReasonRestoreIncompatible, message: msg}
	}
	if ev, ok := cachev1alpha1.LookupEngineVersion(cc.Spec.Engine, cc.Spec.Version); ok && int(cb.Status.RDBVersion) > ev.RDBVersion {
		return &stall{reason: cachev1alpha1.ReasonRestoreIncompatible, message: fmt.Sprintf(
			"spec.restore.backup: CacheBackup %s is an RDB version %d dump, and %s reads RDB version %d at most; restore it into a cluster on an engine version that reads it (docs/engines.md), or name an older backup",
			rs.Backup, cb.Status.RDBVersion, ev, ev.RDBVersion)}
	}
	cc.Status.RestoreFrom = cb.Status.Location.DeepCopy()
	return nil
}

// shardLayoutMismatch says why a cluster cannot restore a backup of
// another layout: a sharded cluster's backup (one dump per shard) only
// into a sharded cluster of the same shard count, a replication cluster's
// dump only into a replication cluster. Empty when it can.
func shardLayoutMismatch(cc *cachev1alpha1.CacheCluster, cb *cachev1alpha1.CacheBackup) string {
	have, want := len(cb.Status.Shards), int(cc.ShardCount())
	switch {
	case cb.IsSharded() && !cc.IsSharded():
		return fmt.Sprintf("spec.restore.backup: CacheBackup %s is a sharded cluster's backup (%d shards, one dump each); restore it into a CacheCluster with mode: sharded and shards: %d", cb.Name, have, have)
	case !cb.IsSharded() && cc.IsSharded():
		return fmt.Sprintf("spec.restore.backup: CacheBackup %s is a replication cluster's backup (one dump); a sharded cluster restores only a sharded cluster's backup: restore it into a CacheCluster with mode: replication", cb.Name)
	case cc.IsSharded() && have != want:
		return fmt.Sprintf("spec.restore.backup: CacheBackup %s holds %d shards and this cluster has %d: a sharded backup restores only into the same shard count; create the cluster with shards: %d, then change spec.shards to %d (resharding moves the slots)", cb.Name, have, want, have, want)
	}
	return ""
}

func orPending(p cachev1alpha1.BackupPhase) cachev1alpha1.BackupPhase {
	if p == "" {
		return cachev1alpha1.BackupPending
	}
	return p
}

// render turns the spec into objects. A spec that cannot be rendered stalls
// the cluster before anything is applied.
func (r *Reconciler) render(ctx context.Context, s *scope) error {
	caps, err := r.Capabilities.Get(ctx)
	if err != nil {
		return fmt.Errorf("reading cluster capabilities: %w", err)
	}
	objs, err := r.Renderer.Render(s.cc, caps)
	if err != nil {
		return &stall{reason: cachev1alpha1.ReasonRenderFailed, message: "The spec cannot be rendered: " + err.Error()}
	}
	s.desired = objs
	return nil
}

// patchStatus writes the status when it changed, and only then: every write
// makes Argo CD refresh the application.
func (r *Reconciler) patchStatus(ctx context.Context, original, cc *cachev1alpha1.CacheCluster) error {
	if equality.Semantic.DeepEqual(original.Status, cc.Status) {
		return nil
	}
	patch := client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{})
	if log := ctrl.LoggerFrom(ctx).V(1); log.Enabled() {
		data, _ := patch.Data(cc)
		log.Info("Patching status", "patch", string(data))
	}
	if err := r.Client.Status().Patch(ctx, cc, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patching status: %w", err)
	}
	return nil
}

// conditionChanged tells whether a condition that day-two writes appeared,
// disappeared or changed its status.
func conditionChanged(o, n *cachev1alpha1.CacheCluster, typ string) bool {
	a, b := meta.FindStatusCondition(o.Status.Conditions, typ), meta.FindStatusCondition(n.Status.Conditions, typ)
	return (a == nil) != (b == nil) || (a != nil && b != nil && a.Status != b.Status)
}

// jitter spreads requeues of many clusters over time.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}

// SetupWithManager registers the controller and its watches.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Renderer == nil {
		rd, err := renderer.Shared()
		if err != nil {
			return err
		}
		r.Renderer = rd
	}
	if r.Capabilities == nil {
		dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
		if err != nil {
			return err
		}
		r.Capabilities = NewDiscoveryCapabilities(dc, 5*time.Minute)
	}
	if r.Recorder == nil {
		r.Recorder = boundedRecorder{mgr.GetEventRecorder(ControllerName)}
	}
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	registerPhaseMetric(mgr.GetCache())

	workers := r.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		For(&cachev1alpha1.CacheCluster{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{},
			predicate.LabelChangedPredicate{},
			// Day-two approves what the pods run in status.rollout, and
			// its operation decides the phase.
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				o, ok1 := e.ObjectOld.(*cachev1alpha1.CacheCluster)
				n, ok2 := e.ObjectNew.(*cachev1alpha1.CacheCluster)
				return ok1 && ok2 && (!equality.Semantic.DeepEqual(o.Status.Rollout, n.Status.Rollout) ||
					!equality.Semantic.DeepEqual(o.Status.Operation, n.Status.Operation) ||
					// A restore checked: the pods stop downloading it. A
					// data loss found or ended: the phase says so.
					conditionChanged(o, n, cachev1alpha1.ConditionRestored) || conditionChanged(o, n, cachev1alpha1.ConditionDataLost) ||
					// A sharded cluster serves, or stops serving, every slot.
					conditionChanged(o, n, cachev1alpha1.ConditionShardsReady))
			}},
			// Deletion sets a timestamp; let it through even if a
			// generation did not change.
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				return !e.ObjectNew.GetDeletionTimestamp().IsZero()
			}},
		)))
	for _, obj := range []client.Object{
		&appsv1.StatefulSet{}, &corev1.Service{}, &corev1.ConfigMap{}, &corev1.Secret{},
		&policyv1.PodDisruptionBudget{}, &networkingv1.NetworkPolicy{},
	} {
		b = b.Owns(obj)
	}
	// A cluster restoring a CacheBackup starts when the backup completes.
	b = b.Watches(&cachev1alpha1.CacheBackup{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &cachev1alpha1.CacheClusterList{}
		if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, cc := range list.Items {
			if rs := cc.Spec.Restore; rs != nil && rs.Backup == o.GetName() && cc.Status.RestoreFrom == nil {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&cc)})
			}
		}
		return out
	}))
	// cert-manager's Secret of a cluster with an issuer is cert-manager's,
	// not the cluster's; its label (the Certificate's secretTemplate)
	// names the cluster.
	b = b.Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[cachev1alpha1.LabelCluster]
		if name == "" || metav1.GetControllerOf(o) != nil {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
	}))
	// Pods belong to the StatefulSet, not to the CacheCluster; their label
	// names the cluster.
	b = b.Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[cachev1alpha1.LabelCluster]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
	}))
	return b.Complete(r)
}
