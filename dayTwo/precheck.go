package daytwo

import (
	"context"
	"fmt"
	"strings"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/renderer"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// The upgrade pre-check: before any pod restarts on a new template, one
// pod made from it must start (an image that does not pull, a value Redis
// refuses at start-up). plan/operations.go decides when it starts, passes
// or fails.

// precheckName names the pre-check pod and its ConfigMap.
func precheckName(cc *cachev1alpha1.CacheCluster) string { return cc.Name + "-precheck" }

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

// startPrecheck starts a pod with the new template: the StatefulSet's pod
// and ConfigMap rendered from the target values, an empty data folder, no
// label any Service selects.
func (r *Reconciler) startPrecheck(ctx context.Context, cc *cachev1alpha1.CacheCluster, target cachev1alpha1.RolloutValues) error {
	// The cache may not show the pod made a moment ago: ask the API
	// server, so a pre-check pod is not deleted and made again while it
	// starts.
	live := &corev1.Pod{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: precheckName(cc)}, live)
	if err == nil && live.DeletionTimestamp.IsZero() && live.Annotations[annotationTemplateKey] == renderer.TemplateKey(target) {
		return nil
	}
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if err == nil && !metav1.IsControlledBy(live, cc) {
		// Someone else's pod has the pre-check's name: never delete it.
		r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventPrecheckFailed, "Precheck",
			"Pod %s exists and is not controlled by this CacheCluster; the upgrade pre-check waits until it is renamed or deleted", live.Name)
		return fmt.Errorf("the pre-check pod name %s is taken by a pod this cluster does not control", live.Name)
	}
	if err := r.deletePrecheck(ctx, cc); err != nil {
		return err
	}
	draft := cc.DeepCopy()
	approveValues(&draft.Status, target)
	objs, err := renderer.Render(draft, renderer.DefaultCapabilities())
	if err != nil {
		return fmt.Errorf("rendering the new template: %w", err)
	}
	var sts appsv1.StatefulSet
	var cm corev1.ConfigMap
	for _, o := range objs {
		switch o.GetKind() {
		case "StatefulSet":
			// The cache pods', not the backup store's.
			if o.GetName() == cc.Name {
				err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &sts)
			}
		case "ConfigMap":
			// redis.conf, not another ConfigMap of the cluster (the restore
			// state).
			if o.GetName() == cc.Name+"-config" {
				err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cm)
			}
		}
		if err != nil {
			return err
		}
	}
	name := precheckName(cc)
	labels := map[string]string{cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue, cachev1alpha1.LabelPrecheck: cc.Name}
	pcm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cc.Namespace, Name: name, Labels: labels}, Data: cm.Data}
	spec := sts.Spec.Template.Spec.DeepCopy()
	spec.RestartPolicy = corev1.RestartPolicyNever
	spec.TerminationGracePeriodSeconds = ptrTo[int64](5)
	for i, v := range spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.Name {
			spec.Volumes[i].ConfigMap.Name = name
		}
	}
	for _, t := range sts.Spec.VolumeClaimTemplates {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: cc.Namespace, Name: name, Labels: labels,
			Annotations: map[string]string{annotationTemplateKey: renderer.TemplateKey(target)},
		},
		Spec: *spec,
	}
	for _, o := range []client.Object{pcm, pod} {
		if err := controllerutil.SetControllerReference(cc, o, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the pre-check %s: %w", strings.ToLower(o.GetObjectKind().GroupVersionKind().Kind), err)
		}
	}
	return nil
}

// deletePrecheck removes the pre-check pod and ConfigMap, and only those
// this cluster controls: the delete is conditioned on the UID read, so an
// object of the same name that belongs to someone else is never removed.
func (r *Reconciler) deletePrecheck(ctx context.Context, cc *cachev1alpha1.CacheCluster) error {
	zero := int64(0)
	key := client.ObjectKey{Namespace: cc.Namespace, Name: precheckName(cc)}
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

func ptrTo[T any](v T) *T { return &v }

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
func precheckState(p *corev1.Pod) *plan.PrecheckState {
	st := &plan.PrecheckState{TemplateKey: p.Annotations[annotationTemplateKey]}
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

const annotationTemplateKey = "cache.cacheops.io/template-key"
