package daytwo

import (
	"context"
	"fmt"
	"strings"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/renderer"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// The upgrade pre-check: before any pod restarts on a new template, one
// pod made from it must start (an image that does not pull, a value Redis
// refuses at start-up). plan/operations.go decides when it starts, passes
// or fails.

// precheckStart makes the pre-check pod for the target values.
func (r *Reconciler) precheckStart(ctx context.Context, s *scope, a plan.Action) error {
	return r.startPrecheck(ctx, s.cc, *a.Values)
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

// templateKeyOf computes renderer.TemplateKey from a rendered pod template.
func templateKeyOf(t *corev1.PodTemplateSpec) string {
	for _, c := range t.Spec.Containers {
		if c.Name == "redis" {
			return renderer.TemplateKeyOf(c.Image, t.Annotations[cachev1alpha1.AnnotationEngine], t.Annotations[cachev1alpha1.AnnotationVersion], t.Annotations[cachev1alpha1.AnnotationRestartConfig], c.Resources)
		}
	}
	return ""
}

// precheckState judges the pre-check pod: ready, failed (with the reason
// the kubelet gives), or still starting.
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
