package daytwo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

// observeWorkload adds the StatefulSet and the pre-check pod to the
// snapshot.
func (r *Reconciler) observeWorkload(ctx context.Context, cc *cachev1alpha1.CacheCluster, snap *Snapshot) error {
	sts := &appsv1.StatefulSet{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: cc.Name}, sts)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		st := &StatefulSetState{
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
		snap.Precheck = precheckState(pod)
	}
	return nil
}

// templateKeyOf computes renderer.TemplateKey from a rendered pod template.
func templateKeyOf(t *corev1.PodTemplateSpec) string {
	for _, c := range t.Spec.Containers {
		if c.Name == "redis" {
			return renderer.TemplateKeyOf(c.Image, t.Annotations[cachev1alpha1.AnnotationVersion], t.Annotations[cachev1alpha1.AnnotationRestartConfig], c.Resources)
		}
	}
	return ""
}

// precheckState judges the pre-check pod: ready, failed (with the reason
// the kubelet gives), or still starting.
func precheckState(p *corev1.Pod) *PrecheckState {
	st := &PrecheckState{TemplateKey: p.Annotations[cachev1alpha1.AnnotationTemplateKey]}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			st.Ready = true
		}
	}
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		st.Failure = fmt.Sprintf("the pre-check pod ended (%s): %s", p.Status.Phase, p.Status.Message)
	}
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil && badWaiting[cs.State.Waiting.Reason]:
			st.Failure = fmt.Sprintf("the new template does not start: %s: %s", cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case cs.RestartCount > 0 || cs.State.Terminated != nil:
			t := cs.State.Terminated
			if t == nil {
				t = cs.LastTerminationState.Terminated
			}
			msg := "the Redis process of the pre-check pod exited"
			if t != nil {
				msg += fmt.Sprintf(" with code %d (%s) %s", t.ExitCode, t.Reason, strings.TrimSpace(t.Message))
			}
			st.Failure = msg + "; see its log: kubectl logs " + p.Name
		}
	}
	if st.Failure != "" {
		st.Ready = false
	}
	return st
}

var badWaiting = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CrashLoopBackOff": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// setQueued keeps the Queued condition in step with the spec changes that
// wait for the running operation.
func (r *Reconciler) setQueued(ctx context.Context, cc *cachev1alpha1.CacheCluster, msg string) error {
	cur := meta.FindStatusCondition(cc.Status.Conditions, cachev1alpha1.ConditionQueued)
	switch {
	case msg == "" && cur == nil:
		return nil
	case msg != "" && cur != nil && cur.Message == msg:
		return nil
	}
	return r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) {
		if msg == "" {
			meta.RemoveStatusCondition(&st.Conditions, cachev1alpha1.ConditionQueued)
			return
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: cachev1alpha1.ConditionQueued, Status: metav1.ConditionTrue, Reason: cachev1alpha1.ReasonWaitingForOperation,
			Message: msg, ObservedGeneration: cc.Generation,
		})
	})
}

// approve writes values to status.rollout, keeping the verdict on a
// blocked change.
func approve(st *cachev1alpha1.CacheClusterStatus, v cachev1alpha1.RolloutValues) {
	ro := &cachev1alpha1.RolloutStatus{RolloutValues: *v.DeepCopy()}
	if st.Rollout != nil {
		ro.Blocked = st.Rollout.Blocked
	}
	st.Rollout = ro
}

// executeOperation takes one step of a scaling, upgrade, reconfiguration
// or switchover.
func (r *Reconciler) executeOperation(ctx context.Context, cc *cachev1alpha1.CacheCluster, snap Snapshot, a Action, pw string) error {
	log := ctrl.LoggerFrom(ctx)
	now := metav1.NewTime(r.now())
	switch a.Type {
	case ActionApprove:
		return r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) { approve(st, *a.Values) })

	case ActionStartOperation:
		op := a.Operation.DeepCopy()
		op.ID, op.StartedAt, op.StepStartedAt = newID(), now, &now
		if err := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) {
			st.Operation = op
			// spec moved on from a refused change: a later return to it is
			// tried again.
			if st.Rollout != nil && st.Rollout.Blocked != nil && op.Type != cachev1alpha1.OperationSwitchover {
				st.Rollout = st.Rollout.DeepCopy()
				st.Rollout.Blocked = nil
			}
		}); err != nil {
			return err
		}
		log.Info("Operation started", "operation", op.ID, "type", op.Type, "reason", op.Reason)
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventOperationStarted, string(op.Type), "%s %s: %s", op.Type, op.ID, op.Reason)
		return nil

	case ActionNextStep:
		op := a.Operation
		if err := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) { st.Operation = op }); err != nil {
			return err
		}
		if op.Step == cachev1alpha1.StepSwitchover || op.Step == StepRollbackSwitchover {
			r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventSwitchover, "Switchover", "%s %s: switchover %s→%s (%s)", op.Type, op.ID, op.FromPod, op.ToPod, a.Reason)
		}
		return nil

	case ActionCompleteOperation:
		op := cc.Status.Operation
		if err := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) {
			if a.Values != nil {
				approve(st, *a.Values)
			}
			st.Operation = nil
			if op != nil && op.Type == cachev1alpha1.OperationUpgrade && st.Rollout != nil {
				st.Rollout = st.Rollout.DeepCopy()
				st.Rollout.Blocked = nil
				if a.Operation != nil && a.Operation.Reason != "" && op.Target != nil {
					st.Rollout.Blocked = &cachev1alpha1.RolloutBlock{
						Target: renderer.ValuesKey(*op.Target), Reason: cachev1alpha1.ReasonUpgradeRolledBack,
						Message: strings.TrimPrefix(a.Operation.Reason, "rollback: ") + ". The pods run the previous template again; change spec (fix or revert it) to try again.",
					}
				}
			}
		}); err != nil {
			return err
		}
		if op != nil {
			took := r.now().Sub(op.StartedAt.Time).Round(time.Millisecond)
			log.Info("Operation completed", "operation", op.ID, "type", op.Type, "duration", took.String())
			if op.Type == cachev1alpha1.OperationUpgrade && op.Step == cachev1alpha1.StepRollback {
				r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventRolledBack, string(op.Type), "%s %s rolled back in %s: %s", op.Type, op.ID, took, op.Reason)
			} else {
				r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventOperationDone, string(op.Type), "%s %s completed in %s: %s", op.Type, op.ID, took, op.Reason)
			}
			if op.Type == cachev1alpha1.OperationUpgrade {
				upgradeDuration.WithLabelValues(cc.Namespace, cc.Name).Observe(took.Seconds())
			}
		}
		return nil

	case ActionPrecheckStart:
		return r.startPrecheck(ctx, cc, *a.Values)

	case ActionPrecheckPass:
		if err := r.deletePrecheck(ctx, cc); err != nil {
			return err
		}
		if err := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) {
			approve(st, *a.Values)
			st.Operation = a.Operation
		}); err != nil {
			return err
		}
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventPrecheckPassed, "Precheck", "%s %s: %s; restarting the pods in order", a.Operation.Type, a.Operation.ID, a.Reason)
		return nil

	case ActionPrecheckFail:
		op := cc.Status.Operation
		if err := r.deletePrecheck(ctx, cc); err != nil {
			return err
		}
		msg := fmt.Sprintf("Pre-check of %q failed: %s. No pod was restarted; fix spec (or revert it) to try again.", op.Reason, a.Reason)
		if err := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) {
			if st.Rollout != nil {
				st.Rollout = st.Rollout.DeepCopy()
				st.Rollout.Blocked = &cachev1alpha1.RolloutBlock{Target: renderer.ValuesKey(*op.Target), Reason: cachev1alpha1.ReasonUpgradePrecheckFailed, Message: msg}
			}
			st.Operation = nil
		}); err != nil {
			return err
		}
		log.Info("Pre-check failed", "operation", op.ID, "reason", a.Reason)
		r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventPrecheckFailed, "Precheck", "%s", msg)
		return nil

	case ActionRestartPod:
		// The cache may not show a deletion made a moment ago: ask the API
		// server, so a pod is restarted once and never its replacement.
		live := &corev1.Pod{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: a.Pod}, live); err != nil {
			return client.IgnoreNotFound(err)
		}
		if sp, ok := snap.pod(a.Pod); !live.DeletionTimestamp.IsZero() || (ok && sp.UID != "" && sp.UID != live.UID) {
			return nil
		}
		op := cc.Status.Operation.DeepCopy()
		if op.Type != cachev1alpha1.OperationRestore {
			// Record the restart before it happens: its deadline starts
			// now. (A restore recreates every pod made before its step
			// began; that time stays.)
			op.StepStartedAt = &now
			if err := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) { st.Operation = op }); err != nil {
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
		podRestarts.WithLabelValues(cc.Namespace, cc.Name).Inc()
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventPodRestarted, string(op.Type), "%s %s: restarting %s (%s)", op.Type, op.ID, a.Pod, a.Reason)
		return nil

	case ActionRollback:
		if err := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) {
			approve(st, *a.Values)
			st.Operation = a.Operation
		}); err != nil {
			return err
		}
		log.Info("Rolling back", "operation", a.Operation.ID, "reason", a.Reason)
		r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventRolledBack, "Rollback", "%s %s: rolling back: %s", a.Operation.Type, a.Operation.ID, a.Reason)
		return nil

	case ActionGracefulSwitchover:
		from, _ := snap.pod(a.Master)
		to, _ := snap.pod(a.Pod)
		timeout := max(snap.ProbeTimeout, 5*time.Second)
		c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(from.IP, "6379"), Password: pw, MaxRetries: -1, PoolSize: 1, DisableIdentity: true,
			DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
		defer c.Close()
		err := c.Do(ctx, "FAILOVER", "TO", to.IP, "6379", "TIMEOUT", strconv.FormatInt(timeout.Milliseconds(), 10)).Err()
		if err != nil && !strings.Contains(err.Error(), "already in progress") {
			return fmt.Errorf("FAILOVER TO %s on %s: %w", a.Pod, a.Master, err)
		}
		r.mu.Lock()
		if r.issued == nil {
			r.issued = map[types.NamespacedName]time.Time{}
		}
		r.issued[client.ObjectKeyFromObject(cc)] = r.now()
		r.mu.Unlock()
		return nil

	case ActionEndSwitchover:
		op := cc.Status.Operation
		if err := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) {
			if a.Pod != "" {
				st.CurrentMaster = a.Pod
			}
			if a.Values != nil {
				approve(st, *a.Values) // an aborted upgrade rolls back
			}
			st.Operation = a.Operation
		}); err != nil {
			return err
		}
		r.mu.Lock()
		delete(r.issued, client.ObjectKeyFromObject(cc))
		r.mu.Unlock()
		if _, requested := cc.Annotations[cachev1alpha1.AnnotationSwitchoverTo]; requested && op.Type == cachev1alpha1.OperationSwitchover {
			// The request is served (or refused): take it away, or it
			// would start again.
			patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, cachev1alpha1.AnnotationSwitchoverTo))
			if err := r.Client.Patch(ctx, cc.DeepCopy(), client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		if a.Pod == "" {
			r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventSwitchover, "Switchover", "%s %s: %s", op.Type, op.ID, a.Reason)
			return nil
		}
		took := r.now().Sub(op.StepStartedAt.Time).Round(time.Millisecond)
		switchovers.WithLabelValues(cc.Namespace, cc.Name).Inc()
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventSwitchover, "Switchover", "%s %s: %s is the master (was %s), switchover took %s", op.Type, op.ID, a.Pod, a.Master, took)
		if a.Operation == nil {
			r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventOperationDone, string(op.Type), "%s %s completed: %s", op.Type, op.ID, op.Reason)
		}
		return nil

	case ActionApplyConfig:
		op := cc.Status.Operation
		mismatches, err := r.applyConfig(ctx, snap, a.Config, pw)
		var refused refusedError
		switch {
		case errors.As(err, &refused) && !refused.needsRestart():
			// Redis says the value itself is wrong (or the parameter
			// unknown to this version): a restart would only crash the
			// pods on it. Nothing is restarted; the change is blocked
			// until spec changes, with Redis's own words.
			msg := fmt.Sprintf("Redis refuses spec.config: %v. No pod was restarted and the pods keep their parameters; fix spec.config to try again.", err)
			if perr := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) {
				if st.Rollout != nil {
					st.Rollout = st.Rollout.DeepCopy()
					st.Rollout.Blocked = &cachev1alpha1.RolloutBlock{Target: renderer.ValuesKey(*op.Target), Reason: cachev1alpha1.ReasonInvalidConfig, Message: msg}
				}
				st.Operation = nil
			}); perr != nil {
				return perr
			}
			log.Info("Redis refused the configuration", "operation", op.ID, "error", err.Error())
			r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonInvalidConfig, "Reconfigure", "%s %s: %s", op.Type, op.ID, msg)
			return nil
		case errors.As(err, &refused):
			// Redis will not change a parameter live: roll it in with
			// restarts instead (the pre-check catches a value Redis refuses
			// at start-up too).
			next := op.DeepCopy()
			next.Type, next.Step, next.StepStartedAt, next.RestartAll = cachev1alpha1.OperationUpgrade, cachev1alpha1.StepPrecheck, &now, true
			next.Previous = snap.Approved.DeepCopy()
			next.Reason = strings.TrimSuffix(op.Reason, ": applied live, no restart") + ": rolling restart (" + err.Error() + ")"
			if perr := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) { st.Operation = next }); perr != nil {
				return perr
			}
			r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventConfigApplied, "Reconfigure", "%s %s: Redis refused it live (%v); rolling the pods instead", op.Type, op.ID, err)
			return nil
		case err != nil:
			// A pod did not answer: try again (pods already set keep the
			// value, which is the one asked for).
			return err
		}
		if err := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) {
			approve(st, *a.Values)
			st.Operation = nil
		}); err != nil {
			return err
		}
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventConfigApplied, "Reconfigure", "%s %s: %s on %d pods, checked with CONFIG GET", op.Type, op.ID, a.Reason, len(snap.Pods))
		for _, m := range mismatches {
			r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventConfigApplied, "Reconfigure", "%s", m)
		}
		return nil

	case ActionRunBackup:
		return r.startBackup(ctx, cc, snap, a, pw)

	case ActionClearSwitchoverRequest:
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, cachev1alpha1.AnnotationSwitchoverTo))
		if err := r.Client.Patch(ctx, cc.DeepCopy(), client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); err != nil {
			return client.IgnoreNotFound(err)
		}
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventSwitchover, "Switchover", "Switchover request to %s removed: %s", a.Pod, a.Reason)
		return nil
	}
	return fmt.Errorf("unknown action %s", a.Type)
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
func (r *Reconciler) applyConfig(ctx context.Context, snap Snapshot, params map[string]string, pw string) ([]string, error) {
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
		c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(p.IP, "6379"), Password: pw, MaxRetries: -1, PoolSize: 1, DisableIdentity: true,
			DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
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

// startPrecheck starts a pod with the new template (renderer.RenderPrecheck)
// and applies it and its ConfigMap with server-side apply, as day-one
// applies its objects.
func (r *Reconciler) startPrecheck(ctx context.Context, cc *cachev1alpha1.CacheCluster, target cachev1alpha1.RolloutValues) error {
	// The cache may not show the pod made a moment ago: ask the API
	// server, so a pre-check pod is not deleted and made again while it
	// starts.
	key := client.ObjectKey{Namespace: cc.Namespace, Name: renderer.PrecheckName(cc)}
	live := &corev1.Pod{}
	err := r.APIReader.Get(ctx, key, live)
	if err == nil && live.DeletionTimestamp.IsZero() && live.Annotations[cachev1alpha1.AnnotationTemplateKey] == renderer.TemplateKey(target) {
		return nil
	}
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	podExists := err == nil
	liveCM := &corev1.ConfigMap{}
	cmErr := r.APIReader.Get(ctx, key, liveCM)
	if client.IgnoreNotFound(cmErr) != nil {
		return cmErr
	}
	for _, o := range []struct {
		obj    client.Object
		exists bool
		kind   string
	}{{live, podExists, "Pod"}, {liveCM, cmErr == nil, "ConfigMap"}} {
		if o.exists && !metav1.IsControlledBy(o.obj, cc) {
			// Someone else's object has the pre-check's name: never
			// delete it, nor apply over it.
			r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventPrecheckFailed, "Precheck",
				"%s %s exists and is not controlled by this CacheCluster; the upgrade pre-check waits until it is renamed or deleted", o.kind, key.Name)
			return fmt.Errorf("the pre-check %s name %s is taken by a %s this cluster does not control", strings.ToLower(o.kind), key.Name, strings.ToLower(o.kind))
		}
	}
	if err := r.deletePrecheck(ctx, cc); err != nil {
		return err
	}
	if podExists {
		// An outdated or dying pre-check pod: apply the new one once it
		// is gone (its deletion wakes this cluster), never onto a pod
		// being deleted.
		err := r.APIReader.Get(ctx, key, &corev1.Pod{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	pod, cm, err := renderer.RenderPrecheck(cc, target)
	if err != nil {
		return err
	}
	for _, obj := range []*unstructured.Unstructured{cm, pod} {
		if err := controllerutil.SetControllerReference(cc, obj, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
			client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying the pre-check %s: %w", strings.ToLower(obj.GetKind()), err)
		}
	}
	return nil
}

// deletePrecheck removes the pre-check pod and ConfigMap, and only those
// this cluster controls: the delete is conditioned on the UID read, so an
// object of the same name that belongs to someone else is never removed.
func (r *Reconciler) deletePrecheck(ctx context.Context, cc *cachev1alpha1.CacheCluster) error {
	zero := int64(0)
	key := client.ObjectKey{Namespace: cc.Namespace, Name: renderer.PrecheckName(cc)}
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.ConfigMap{}} {
		if err := r.APIReader.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if !metav1.IsControlledBy(obj, cc) {
			continue
		}
		uid := obj.GetUID()
		opts := &client.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
		if _, isPod := obj.(*corev1.Pod); isPod {
			opts.GracePeriodSeconds = &zero
		}
		if err := r.Client.Delete(ctx, obj, opts); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}
