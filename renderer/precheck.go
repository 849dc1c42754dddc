package renderer

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// PrecheckName names the pre-check pod and its ConfigMap.
func PrecheckName(cc *cachev1alpha1.CacheCluster) string { return cc.Name + "-precheck" }

// precheckGracePeriod is short: the pre-check pod holds no data anyone
// needs.
const precheckGracePeriod int64 = 5

// RenderPrecheck renders the pod of an upgrade pre-check and its ConfigMap:
// the StatefulSet's pod template and redis.conf rendered with status.rollout
// set to target, run once (RestartPolicy Never) on empty folders instead of
// the claims, reading its own copy of the ConfigMap. The pod carries the
// target's template key (AnnotationTemplateKey) and only the managed-by and
// precheck labels: no Service selects it, so it gets no client traffic, and
// without LabelCluster neither the StatefulSet nor day-one's prune counts
// the two objects as its own.
//
// Like Render, it returns objects ready for server-side apply, without an
// owner reference; the caller sets it.
func RenderPrecheck(cc *cachev1alpha1.CacheCluster, target cachev1alpha1.RolloutValues) (pod, cm *unstructured.Unstructured, err error) {
	// The values the pods will run once day-two approves target.
	draft := cc.DeepCopy()
	draft.Status.Rollout = &cachev1alpha1.RolloutStatus{RolloutValues: *target.DeepCopy()}
	objs, err := Render(draft, DefaultCapabilities())
	if err != nil {
		return nil, nil, fmt.Errorf("rendering the new template: %w", err)
	}
	var sts *appsv1.StatefulSet
	var conf *corev1.ConfigMap
	for _, o := range objs {
		switch {
		// The cache pods', not the backup store's.
		case o.GetKind() == "StatefulSet" && o.GetName() == cc.Name:
			sts = &appsv1.StatefulSet{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, sts)
		// redis.conf, not another ConfigMap of the cluster (the restore
		// state).
		case o.GetKind() == "ConfigMap" && o.GetName() == cc.Name+"-config":
			conf = &corev1.ConfigMap{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, conf)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("decoding the rendered %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	if sts == nil || conf == nil {
		return nil, nil, fmt.Errorf("the chart rendered no StatefulSet %s or no ConfigMap %s-config", cc.Name, cc.Name)
	}

	name := PrecheckName(cc)
	labels := map[string]string{cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue, cachev1alpha1.LabelPrecheck: cc.Name}
	pcm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: sts.Namespace, Name: name, Labels: labels},
		Data:       conf.Data,
	}
	spec := sts.Spec.Template.Spec.DeepCopy()
	spec.RestartPolicy = corev1.RestartPolicyNever
	// It runs beside the cluster's pods for a moment: the spread that
	// keeps them apart would keep it off every node they use.
	spec.Affinity, spec.TopologySpreadConstraints = nil, nil
	grace := precheckGracePeriod
	spec.TerminationGracePeriodSeconds = &grace
	for i, v := range spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == conf.Name {
			spec.Volumes[i].ConfigMap.Name = name
		}
	}
	for _, t := range sts.Spec.VolumeClaimTemplates {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	ppod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: sts.Namespace, Name: name, Labels: labels,
			Annotations: map[string]string{cachev1alpha1.AnnotationTemplateKey: TemplateKey(target)},
		},
		Spec: *spec,
	}
	if pod, err = toApply(ppod); err != nil {
		return nil, nil, err
	}
	if cm, err = toApply(pcm); err != nil {
		return nil, nil, err
	}
	return pod, cm, nil
}

// toApply turns a typed object into the unstructured form server-side
// apply takes, without the fields a typed object always carries but no one
// sets here (a null creationTimestamp, an empty status): applied, they
// would only claim fields for the field manager.
func toApply(obj runtime.Object) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: content}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}
