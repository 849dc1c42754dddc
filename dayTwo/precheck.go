package daytwo

import (
	"context"
	"fmt"
	"net"
	"strings"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cacheops/cacheops/dayTwo/backup"
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/renderer"
	"github.com/redis/go-redis/v9"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// The upgrade pre-check: before any pod restarts on a new template, one
// pod made from it must start with the cluster's configuration on a copy of
// the cluster's current data and hold the copy's keys (an image that does
// not pull, a value the server refuses at start-up, data the new version
// or the new configuration does not load). plan/operations.go decides when
// it starts, from which pod it copies the data, and whether it passes
// (plan/precheck.go).

// precheckStart makes the pre-check pod for the target values, seeded from
// the pod the planner named (none: an empty folder).
func (r *Reconciler) precheckStart(ctx context.Context, s *scope, a plan.Action) error {
	seedFrom := ""
	if a.Pod != "" {
		src, ok := s.snap.Pod(a.Pod)
		if !ok || src.IP == "" {
			return fmt.Errorf("the pre-check's data source %s has no address", a.Pod)
		}
		seedFrom = net.JoinHostPort(src.IP, "6379")
	}
	return r.startPrecheck(ctx, s.cc, *a.Values, seedFrom)
}

// precheckPass removes the pre-check pod and starts restarting the pods.
func (r *Reconciler) precheckPass(ctx context.Context, s *scope, a plan.Action) error {
	if err := r.deletePrecheck(ctx, s.cc); err != nil {
		return err
	}
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		approveValues(st, *a.Values)
		st.Operation = a.Operation
	})
	s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventPrecheckPassed, "Precheck", "%s %s: %s; restarting the pods in order", a.Operation.Type, a.Operation.ID, a.Reason)
	return nil
}

// precheckFail removes the pre-check pod and blocks the change: no pod was
// restarted.
func (r *Reconciler) precheckFail(ctx context.Context, s *scope, a plan.Action) error {
	op := s.cc.Status.Operation
	if err := r.deletePrecheck(ctx, s.cc); err != nil {
		return err
	}
	msg := fmt.Sprintf("Pre-check of %q failed: %s. No pod was restarted; fix spec (or revert it) to try again.", op.Reason, a.Reason)
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		block(st, *op.Target, cachev1alpha1.ReasonUpgradePrecheckFailed, msg)
		st.Operation = nil
	})
	ctrl.LoggerFrom(ctx).Info("Pre-check failed", "operation", op.ID, "reason", a.Reason)
	s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventPrecheckFailed, "Precheck", "%s", msg)
	return nil
}

// startPrecheck starts a pod with the new template (renderer.RenderPrecheck)
// and applies it and its ConfigMap with server-side apply, as day-one
// applies its objects.
func (r *Reconciler) startPrecheck(ctx context.Context, cc *cachev1alpha1.CacheCluster, target cachev1alpha1.RolloutValues, seedFrom string) error {
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
	pod, cm, err := renderer.RenderPrecheck(cc, target, seedFrom)
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

// templateKeyOf computes renderer.TemplateKey from a rendered pod template.
func templateKeyOf(t *corev1.PodTemplateSpec) string {
	for _, c := range t.Spec.Containers {
		if c.Name == "redis" {
			return renderer.TemplateKeyOf(c.Image, t.Annotations[cachev1alpha1.AnnotationEngine], t.Annotations[cachev1alpha1.AnnotationVersion], t.Annotations[cachev1alpha1.AnnotationRestartConfig], c.Resources)
		}
	}
	return ""
}

// observePrecheck reads the pre-check pod: precheckState, and for a pod
// that started on a copy of the data and is ready, the key count of its
// server (DBSIZE of the copy's database), which the planner compares with
// the copy's.
func (r *Reconciler) observePrecheck(ctx context.Context, s *scope, p *corev1.Pod) *plan.PrecheckState {
	st := precheckState(p)
	if st.Seed == nil || !st.Ready || st.Failure != "" {
		return st
	}
	if s.access.Password == "" || p.Status.PodIP == "" {
		st.Seed.LoadErr = "the pre-check pod has no address yet"
		return st
	}
	c := redisClient(p.Status.PodIP, s.access)
	defer c.Close()
	// One connection: SELECT holds for the DBSIZE after it.
	var size *redis.IntCmd
	_, err := c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Select(ctx, st.Seed.DB)
		size = pipe.DBSize(ctx)
		return nil
	})
	n := size.Val()
	if err != nil {
		st.Seed.LoadErr = fmt.Sprintf("DBSIZE on %s: %v", p.Name, err)
		return st
	}
	st.Seed.Loaded = n
	return st
}

// precheckState judges the pre-check pod: ready, failed (with the reason
// the kubelet gives), or still starting; with the report of its seed init
// container, when it has one.
func precheckState(p *corev1.Pod) *plan.PrecheckState {
	st := &plan.PrecheckState{TemplateKey: p.Annotations[cachev1alpha1.AnnotationTemplateKey]}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			st.Ready = true
		}
	}
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		st.Failure = fmt.Sprintf("the pre-check pod ended (%s): %s", p.Status.Phase, p.Status.Message)
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name == renderer.SeedContainerName {
			seedState(p, st)
		}
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
			msg := "the server process of the pre-check pod exited"
			if t != nil {
				msg += fmt.Sprintf(" with code %d (%s) %s", t.ExitCode, t.Reason, logEnd(t.Message))
			}
			st.Failure = msg + "; see its log: kubectl logs " + p.Name
		}
	}
	if st.Failure != "" {
		st.Ready = false
	}
	return st
}

// seedState reads what the seed init container copied (its termination
// message), or why it failed: a copy that could not be taken fails the
// pre-check, which says so (not the new version's fault; fixing the
// source or reverting spec tries again).
func seedState(p *corev1.Pod, st *plan.PrecheckState) {
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.Name != renderer.SeedContainerName {
			continue
		}
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		switch {
		case cs.State.Waiting != nil && badWaiting[cs.State.Waiting.Reason]:
			st.Failure = fmt.Sprintf("the container that copies the data does not start: %s: %s", cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case t == nil:
		case t.ExitCode != 0:
			st.Failure = fmt.Sprintf("the copy of the cluster's data for the pre-check could not be taken (exit code %d): %s", t.ExitCode, strings.TrimSpace(t.Message))
		default:
			rep, err := backup.ParseSeedReport(t.Message)
			if err != nil {
				st.Failure = "the copy of the cluster's data for the pre-check reported no key count: " + err.Error()
				return
			}
			st.Seed = &plan.SeedState{Source: rep.Source, Keys: rep.Keys, ExpiringKeys: rep.ExpiringKeys, DB: rep.DB, Loaded: -1}
		}
	}
}

// logEnd is the end of a termination message that holds a log's end (the
// kubelet's FallbackToLogsOnError): its last four lines, at most 600 bytes,
// on one line. A server that refuses its configuration or data says why
// there, and an Event holds about 1 kB.
func logEnd(msg string) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	if len(lines) > 4 {
		lines = lines[len(lines)-4:]
	}
	out := strings.Join(lines, " / ")
	if len(out) > 600 {
		out = "…" + out[len(out)-600:]
	}
	return out
}

var badWaiting = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CrashLoopBackOff": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}
