package daytwo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
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
)

// Reconciler is the day-two controller of replication mode: it observes
// every pod's Redis through the Prober, asks Plan for the next step and
// takes exactly one step per reconcile.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	Prober    *Prober
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
	// AfterStep, when set, is called after each step that succeeded. The
	// manager's --fault-exit-after-step uses it to crash at a chosen point
	// of an operation, so a test can prove a restarted operator finishes
	// the operation it recorded.
	AfterStep func(Action)

	// userSecrets remembers passwords read from users' Secrets, which are
	// not in the label-filtered cache, so a reconcile every probe period
	// during an outage does not GET the Secret every time.
	mu          sync.Mutex
	userSecrets map[types.NamespacedName]cachedPassword
	written     map[types.NamespacedName]uint64
	pressure    pressure
	// issued: when Redis FAILOVER was sent for a cluster's switchover.
	issued map[types.NamespacedName]time.Time
	// backups: the dumps being streamed.
	backups backupRuns
	// verifyErrorsSince: when checking a cluster's restore first failed.
	verifyErrorsSince map[types.NamespacedName]time.Time
}

type cachedPassword struct {
	password string
	read     time.Time
}

// userSecretTTL bounds how long a rotated password in a user's Secret goes
// unnoticed.
const userSecretTTL = 30 * time.Second

// Reconcile takes one step towards a healthy replication topology.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	cc := &cachev1alpha1.CacheCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cc); err != nil {
		if apierrors.IsNotFound(err) {
			r.backups.abort(req.NamespacedName, errors.New("the cluster was deleted"))
			r.Prober.Forget(req.NamespacedName)
			forgetMetrics(req.NamespacedName)
			r.mu.Lock()
			delete(r.userSecrets, req.NamespacedName)
			delete(r.written, req.NamespacedName)
			r.mu.Unlock()
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
	if r.stale(cc) {
		return ctrl.Result{RequeueAfter: 20 * time.Millisecond}, nil
	}

	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(cc.Namespace), client.MatchingLabels{cachev1alpha1.LabelCluster: cc.Name}); err != nil {
		return ctrl.Result{}, err
	}
	password, err := r.password(ctx, cc)
	if err != nil {
		log.V(1).Info("Password not available yet", "reason", err.Error())
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}

	timeout := probeTimeout(cc)
	var targets []Target
	var states []PodState
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp.IsZero() {
			targets = append(targets, Target{Pod: p.Name, IP: p.Status.PodIP})
		}
	}
	r.Prober.Ensure(cc, targets, password, probePeriod(timeout))
	if ro := cc.Status.Rollout; ro != nil {
		// Ordinals scaled away are forgotten: a pod made there later
		// starts on a new volume, which is no loss.
		r.Prober.ForgetRuns(req.NamespacedName, func(pod string) bool { return (PodState{Name: pod}).Ordinal() < int(ro.Replicas) })
	}
	obs := r.Prober.Observations(req.NamespacedName)
	for _, p := range pods.Items {
		o, seen := obs[p.Name]
		st := PodState{
			Name: p.Name, UID: p.UID, IP: p.Status.PodIP, RoleLabel: p.Labels[cachev1alpha1.LabelRole],
			Deleting: !p.DeletionTimestamp.IsZero(), Observed: seen && o.IP == p.Status.PodIP, Obs: o,
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue && p.Status.Phase == corev1.PodRunning {
				st.NotReadySince = c.LastTransitionTime.Time
			}
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				st.Ready = true
			}
		}
		st.Revision = p.Labels[appsv1.ControllerRevisionHashLabelKey]
		st.Created = p.CreationTimestamp.Time
		states = append(states, st)
	}
	recordMetrics(req.NamespacedName, cc.Status.CurrentMaster, states)

	snap := Snapshot{
		Name: cc.Name, Now: r.now(), ProbeTimeout: timeout,
		AutoFailover:  autoFailover(cc),
		CurrentMaster: cc.Status.CurrentMaster,
		Operation:     cc.Status.Operation,
		Pods:          states,
		RecreateAfter: r.recreateAfter(timeout),
		Spec:          renderer.SpecValues(cc),
		SwitchoverTo:  cc.Annotations[cachev1alpha1.AnnotationSwitchoverTo],
		StepDeadline:  r.stepDeadline(),
		RestorePending: cc.Spec.Restore != nil &&
			meta.FindStatusCondition(cc.Status.Conditions, cachev1alpha1.ConditionRestored) == nil,
	}
	if ro := cc.Status.Rollout; ro != nil {
		snap.Approved = ro.RolloutValues.DeepCopy()
		snap.Blocked = ro.Blocked
	}
	if inSwitchover(cc.Status.Operation) {
		r.mu.Lock()
		snap.SwitchoverIssuedAt = r.issued[req.NamespacedName]
		r.mu.Unlock()
	}
	if err := r.observeWorkload(ctx, cc, &snap); err != nil {
		return ctrl.Result{}, err
	}
	backups, err := r.clusterBackups(ctx, cc)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.observeBackups(cc, backups, &snap)
	if err := r.observeRestore(ctx, cc, backups, &snap); err != nil {
		return ctrl.Result{}, err
	}
	nextBackup, err := r.schedule(ctx, cc, backups)
	if err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: 50 * time.Millisecond}, nil
		}
		log.Error(err, "Scheduling a backup")
	}
	action := Plan(snap)
	if m, ok := snap.pod(cc.Status.CurrentMaster); ok && m.Observed && cc.Status.Operation == nil {
		// Reporting must not hold up a step (a failover least of all).
		if err := r.recommend(ctx, cc, m.Obs); err != nil && !apierrors.IsConflict(err) {
			log.Error(err, "Updating recommendations")
		}
	}
	if err := r.setQueued(ctx, cc, Queued(snap)); err != nil && !apierrors.IsConflict(err) {
		log.Error(err, "Updating the Queued condition")
	}
	if cc.Status.Operation != nil {
		log = log.WithValues("operation", cc.Status.Operation.ID)
		ctx = ctrl.LoggerInto(ctx, log)
	}
	switch action.Type {
	case ActionNone:
		if nextBackup > 0 && nextBackup < steadyRecheck {
			return ctrl.Result{RequeueAfter: nextBackup}, nil
		}
		return ctrl.Result{RequeueAfter: steadyRecheck}, nil
	case ActionWait:
		log.V(1).Info("Waiting", "action", action.String())
		return ctrl.Result{RequeueAfter: probePeriod(timeout)}, nil
	}
	if cc.Status.Operation == nil && action.Type == ActionStartOperation {
		log = log.WithValues("operation", action.Operation.Type)
	}
	log.Info("Taking step", "action", action.String())
	if err := r.execute(ctx, cc, snap, action, password); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: 50 * time.Millisecond}, nil
		}
		log.Error(err, "Step failed", "action", action.String())
		return ctrl.Result{RequeueAfter: probePeriod(timeout)}, nil
	}
	if r.AfterStep != nil {
		r.AfterStep(action)
	}
	// Plan the next step on the effect of this one: look again at the pods
	// whose Redis it changed.
	changed := map[ActionType][]string{
		ActionPromote: {action.Pod}, ActionRepoint: {action.Pod}, ActionFence: {action.Pod},
		ActionGracefulSwitchover: {action.Pod, action.Master},
	}
	for _, name := range changed[action.Type] {
		if p, ok := snap.pod(name); ok {
			r.Prober.Refresh(ctx, req.NamespacedName, Target{Pod: p.Name, IP: p.IP}, timeout)
		}
	}
	return ctrl.Result{RequeueAfter: 10 * time.Millisecond}, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// execute takes one step.
func (r *Reconciler) execute(ctx context.Context, cc *cachev1alpha1.CacheCluster, snap Snapshot, a Action, pw string) error {
	log := ctrl.LoggerFrom(ctx)
	if ok, err := r.executeRestore(ctx, cc, snap, a, pw); ok {
		return err
	}
	switch a.Type {
	case ActionBootstrap:
		if err := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) { st.CurrentMaster = a.Pod }); err != nil {
			return err
		}
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventMasterElected, "Bootstrap", "%s is the master", a.Pod)
		return nil

	case ActionStartFailover:
		if op := cc.Status.Operation; op != nil && op.Type == cachev1alpha1.OperationBackup {
			r.backups.abort(client.ObjectKeyFromObject(cc), errFailover)
		}
		id := newID()
		if cc.Status.Operation != nil {
			id = cc.Status.Operation.ID
		}
		op := &cachev1alpha1.OperationStatus{
			ID: id, Type: cachev1alpha1.OperationFailover, FromPod: a.Master, ToPod: a.Pod,
			Reason: a.Reason, StartedAt: metav1.NewTime(r.now()),
		}
		if cc.Status.Operation != nil {
			op.StartedAt = cc.Status.Operation.StartedAt
		}
		if err := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) { st.Operation = op }); err != nil {
			return err
		}
		log.Info("Failover started", "operation", id, "from", a.Master, "to", a.Pod, "reason", a.Reason)
		r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventFailoverStarted, "Failover", "Failover %s: %s; promoting %s", id, a.Reason, a.Pod)
		return nil

	case ActionUnlabel:
		return r.setRole(ctx, cc.Namespace, a.Pod, "")
	case ActionLabelMaster:
		return r.setRole(ctx, cc.Namespace, a.Pod, cachev1alpha1.RoleMaster)
	case ActionLabelReplica:
		return r.setRole(ctx, cc.Namespace, a.Pod, cachev1alpha1.RoleReplica)

	case ActionPromote:
		if op := cc.Status.Operation; op != nil && op.Type == cachev1alpha1.OperationFailover {
			// Decide on fresh offsets, not on the last probe: a replica may
			// have received more of the stream since.
			if better := r.freshBest(ctx, snap, cc.Status.Operation, pw); better != "" && better != a.Pod {
				log.Info("A replica holds more data than the chosen one; changing the failover target", "from", a.Pod, "to", better)
				return r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) {
					op := st.Operation.DeepCopy()
					op.ToPod = better
					st.Operation = op
				})
			}
		}
		p, _ := snap.pod(a.Pod)
		return replicaOf(ctx, p.IP, pw, "NO", "ONE")

	case ActionRepoint, ActionFence:
		p, _ := snap.pod(a.Pod)
		m, ok := snap.pod(a.Master)
		if !ok || m.IP == "" {
			return fmt.Errorf("master %s has no address", a.Master)
		}
		if op := cc.Status.Operation; a.Type == ActionRepoint && op != nil && op.Type == cachev1alpha1.OperationFailover && m.Obs.Role != "master" && !oldMasterAnswers(snap, op) {
			// Detaching a replica before the promotion, the old master
			// silent: the offsets stand still, and the replica must not
			// hold more of the stream than the target, or following the
			// target would resynchronise it in full. Look again now; if it
			// does, the planner chooses again on what was seen. (While the
			// old master answers, both receive the same stream from it and
			// the target catches up with whatever the replica is ahead.)
			key := client.ObjectKeyFromObject(cc)
			fp := ProbeOnce(ctx, Target{Pod: p.Name, IP: p.IP}, pw, snap.ProbeTimeout)
			fm := ProbeOnce(ctx, Target{Pod: m.Name, IP: m.IP}, pw, snap.ProbeTimeout)
			if !fp.Reachable || !fm.Reachable || moreHistory(PodState{Obs: fp}, PodState{Obs: fm}) {
				r.Prober.Refresh(ctx, key, Target{Pod: p.Name, IP: p.IP}, snap.ProbeTimeout)
				r.Prober.Refresh(ctx, key, Target{Pod: m.Name, IP: m.IP}, snap.ProbeTimeout)
				return fmt.Errorf("not detaching %s: it holds offset %d, the failover target %s %d (or one did not answer)", a.Pod, fp.Offset, a.Master, fm.Offset)
			}
		}
		if err := replicaOf(ctx, p.IP, pw, m.IP, "6379"); err != nil {
			return err
		}
		if a.Type == ActionFence {
			// Clients still connected to it (a Service's endpoints change,
			// open connections stay) would write to a replica: drop them so
			// they reconnect to the master.
			if err := killClients(ctx, p.IP, pw); err != nil {
				log.Error(err, "Dropping the client connections of a fenced pod", "pod", a.Pod)
			}
			r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventFenced, "Fence", "%s believed it was master; made it a replica of %s and dropped its client connections", a.Pod, a.Master)
		}
		return nil

	case ActionRecreate:
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: cc.Namespace, Name: a.Pod}}
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, p)); err != nil {
			return err
		}
		r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventPodRecreated, "Recreate", "Deleted %s (%s); its StatefulSet recreates it on the same volume", a.Pod, a.Reason)
		return nil

	case ActionCompleteFailover:
		op := cc.Status.Operation
		if err := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) {
			st.CurrentMaster = a.Pod
			st.Operation = nil
		}); err != nil {
			return err
		}
		took := r.now().Sub(op.StartedAt.Time)
		failovers.WithLabelValues(cc.Namespace, cc.Name).Inc()
		failoverDuration.WithLabelValues(cc.Namespace, cc.Name).Observe(took.Seconds())
		log.Info("Failover completed", "from", op.FromPod, "to", a.Pod, "duration", took.String())
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventFailoverCompleted, "Failover", "Failover %s completed: %s→%s in %s", op.ID, op.FromPod, a.Pod, took.Round(time.Millisecond))
		return nil
	}
	return r.executeOperation(ctx, cc, snap, a, pw)
}

func oldMasterAnswers(snap Snapshot, op *cachev1alpha1.OperationStatus) bool {
	p, ok := snap.pod(op.FromPod)
	return ok && healthy(p)
}

// freshBest probes the failover target and the other replicas now and
// returns a replica that holds more of the stream than the target, or "".
// Replicas that follow the target already hold no more than it does.
func (r *Reconciler) freshBest(ctx context.Context, snap Snapshot, op *cachev1alpha1.OperationStatus, pw string) string {
	target, ok := snap.pod(op.ToPod)
	if !ok {
		return ""
	}
	target.Obs = ProbeOnce(ctx, Target{Pod: target.Name, IP: target.IP}, pw, snap.ProbeTimeout)
	target.Observed = true
	if !healthy(target) {
		return ""
	}
	best := target
	for _, p := range sortedPods(snap) {
		if p.Name == op.FromPod || p.Name == op.ToPod || p.IP == "" || p.Deleting {
			continue
		}
		p.Obs = ProbeOnce(ctx, Target{Pod: p.Name, IP: p.IP}, pw, snap.ProbeTimeout)
		p.Observed = true
		if healthy(p) && p.Obs.Role == "slave" && p.Obs.MasterHost != target.IP && moreHistory(p, best) {
			best = p
		}
	}
	if best.Name == target.Name {
		return ""
	}
	return best.Name
}

// setRole sets (or, with "", removes) a pod's role label with a merge patch
// under our own field manager.
func (r *Reconciler) setRole(ctx context.Context, ns, pod, role string) error {
	value := "null"
	if role != "" {
		value = fmt.Sprintf("%q", role)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, cachev1alpha1.LabelRole, value))
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}}
	return client.IgnoreNotFound(r.Client.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)))
}

// patchStatus changes day-two's part of the status, guarded by the
// resourceVersion it was read at.
func (r *Reconciler) patchStatus(ctx context.Context, cc *cachev1alpha1.CacheCluster, mutate func(*cachev1alpha1.CacheClusterStatus)) error {
	original := cc.DeepCopy()
	mutate(&cc.Status)
	if equality.Semantic.DeepEqual(original.Status, cc.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, cc, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	r.wrote(cc)
	return nil
}

// wrote remembers the resourceVersion of our last status write, so the
// next reconcile waits until the cache has caught up with it instead of
// taking a step twice on what it saw before.
func (r *Reconciler) wrote(cc *cachev1alpha1.CacheCluster) {
	rv, err := strconv.ParseUint(cc.ResourceVersion, 10, 64)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.written == nil {
		r.written = map[types.NamespacedName]uint64{}
	}
	r.written[client.ObjectKeyFromObject(cc)] = rv
}

// stale tells whether the cached object is older than our last write.
// resourceVersions are opaque to clients, but etcd's are increasing
// integers; anything else never counts as stale.
func (r *Reconciler) stale(cc *cachev1alpha1.CacheCluster) bool {
	key := client.ObjectKeyFromObject(cc)
	r.mu.Lock()
	defer r.mu.Unlock()
	want, ok := r.written[key]
	if !ok {
		return false
	}
	rv, err := strconv.ParseUint(cc.ResourceVersion, 10, 64)
	if err != nil || rv >= want {
		delete(r.written, key)
		return false
	}
	return true
}

// password reads the cluster's Redis password.
func (r *Reconciler) password(ctx context.Context, cc *cachev1alpha1.CacheCluster) (string, error) {
	name, key := renderer.AuthSecretName(cc), renderer.DefaultSecretKey
	var rd client.Reader = r.Client
	ref := cc.Spec.Auth.SecretRef
	cacheKey := types.NamespacedName{Namespace: cc.Namespace, Name: cc.Name}
	if ref != nil {
		name = ref.Name
		if ref.Key != "" {
			key = ref.Key
		}
		r.mu.Lock()
		c, ok := r.userSecrets[cacheKey]
		r.mu.Unlock()
		if ok && r.now().Sub(c.read) < userSecretTTL {
			return c.password, nil
		}
		// The user's Secret is not in our label-filtered cache.
		rd = r.APIReader
	}
	s := &corev1.Secret{}
	if err := rd.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: name}, s); err != nil {
		return "", err
	}
	pw := string(s.Data[key])
	if pw == "" {
		return "", fmt.Errorf("secret %s has no key %s", name, key)
	}
	if ref != nil {
		r.mu.Lock()
		if r.userSecrets == nil {
			r.userSecrets = map[types.NamespacedName]cachedPassword{}
		}
		r.userSecrets[cacheKey] = cachedPassword{password: pw, read: r.now()}
		r.mu.Unlock()
	}
	return pw, nil
}

// killClients drops a pod's normal client connections (not its
// replication links).
func killClients(ctx context.Context, ip, password string) error {
	c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(ip, "6379"), Password: password, MaxRetries: -1, PoolSize: 1, DisableIdentity: true,
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	defer c.Close()
	return c.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err()
}

func replicaOf(ctx context.Context, ip, password, host, port string) error {
	c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(ip, "6379"), Password: password, MaxRetries: -1, PoolSize: 1, DisableIdentity: true,
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	defer c.Close()
	return c.Do(ctx, "REPLICAOF", host, port).Err()
}

func probeTimeout(cc *cachev1alpha1.CacheCluster) time.Duration {
	if s := cc.Spec.HighAvailability.ProbeTimeoutSeconds; s > 0 {
		return time.Duration(s) * time.Second
	}
	return defaultProbeTimeout
}

// probePeriod looks four times per timeout, so a dead master is noticed
// within a quarter of the timeout after it expires.
func probePeriod(timeout time.Duration) time.Duration {
	p := timeout / 4
	return min(max(p, 100*time.Millisecond), 2*time.Second)
}

// recreateAfter is how long a pod may stay not-Ready before it is
// recreated: long enough for a large dataset to load from disk.
func (r *Reconciler) stepDeadline() time.Duration {
	if r.StepDeadline > 0 {
		return r.StepDeadline
	}
	return 5 * time.Minute
}

func (r *Reconciler) recreateAfter(probeTimeout time.Duration) time.Duration {
	if r.RecreateAfter > 0 {
		return r.RecreateAfter
	}
	return max(5*time.Minute, 60*probeTimeout)
}

func autoFailover(cc *cachev1alpha1.CacheCluster) bool {
	ha := cc.Spec.HighAvailability
	if ha.Enabled != nil && !*ha.Enabled {
		return false
	}
	return ha.AutoFailover == nil || *ha.AutoFailover
}

func newID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func objectMeta(key types.NamespacedName) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}
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
		r.Prober = NewProber()
	}
	if err := mgr.Add(stopProber{r.Prober}); err != nil {
		return err
	}
	if err := mgr.Add(&r.backups); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		// Spec changes, and the switchover request annotation.
		For(&cachev1alpha1.CacheCluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(clusterOf)).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(clusterOf)).
		// A disaster recovery waits for its restore ConfigMap.
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(clusterOf)).
		Watches(&cachev1alpha1.CacheBackup{}, handler.EnqueueRequestsFromMapFunc(backupsOf)).
		WatchesRawSource(source.Channel(r.Prober.events, &handler.EnqueueRequestForObject{})).
		Complete(r)
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
type stopProber struct{ p *Prober }

func (s stopProber) Start(ctx context.Context) error {
	<-ctx.Done()
	s.p.Stop()
	return nil
}
