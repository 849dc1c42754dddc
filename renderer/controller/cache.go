package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// CacheOptions limits the manager's cache to the objects cacheops labels as
// its own, so the operator does not hold every Secret, ConfigMap and Pod of
// the cluster in memory, and keeps of each cached object only what some
// code reads (docs/scale.md, "Cache"):
//
//   - the rendered kinds keep a compact managedFields, who wrote the
//     object and when, without the field sets: day-one's drift check
//     (upToDate) reads that and the applied-hash annotation, never the
//     cached spec;
//   - Services keep their type and cluster IP, PodDisruptionBudgets and
//     NetworkPolicies no spec: that is what their health (kstatus) reads;
//   - StatefulSets keep the replicas, the selector and of the pod template
//     the annotations and the containers' names, images and resources
//     (day-two's template key, the restore init container);
//   - pods keep what stripPod keeps; CacheClusters and every other kind
//     lose managedFields (a cached CacheCluster is patched, and a patch
//     computed between two cached copies never carries them).
//
// Secrets and ConfigMaps keep their data: day-two reads the password, the
// certificates and the users' ACL file from them.
func CacheOptions() cache.Options {
	owned := labels.SelectorFromSet(labels.Set{cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue})
	byObject := map[client.Object]cache.ByObject{
		&appsv1.StatefulSet{}:           {Label: owned, Transform: stripStatefulSet},
		&corev1.Service{}:               {Label: owned, Transform: stripService},
		&corev1.ConfigMap{}:             {Label: owned, Transform: compactManagedFields},
		&corev1.Secret{}:                {Label: owned, Transform: compactManagedFields},
		&policyv1.PodDisruptionBudget{}: {Label: owned, Transform: stripPodDisruptionBudget},
		&networkingv1.NetworkPolicy{}:   {Label: owned, Transform: stripNetworkPolicy},
		&corev1.Pod{}:                   {Label: owned, Transform: stripPod},
	}
	return cache.Options{ByObject: byObject, DefaultTransform: cache.TransformStripManagedFields()}
}

// compactManagedFields keeps of an object's managedFields the writes to
// the object itself (not its status): who, how and when, not which fields.
func compactManagedFields(obj any) (any, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	var out []metav1.ManagedFieldsEntry
	for _, e := range o.GetManagedFields() {
		if e.Subresource != "" {
			continue
		}
		out = append(out, metav1.ManagedFieldsEntry{Manager: e.Manager, Operation: e.Operation, Time: e.Time})
	}
	o.SetManagedFields(out)
	return obj, nil
}

func stripService(obj any) (any, error) {
	if svc, ok := obj.(*corev1.Service); ok {
		svc.Spec = corev1.ServiceSpec{Type: svc.Spec.Type, ClusterIP: svc.Spec.ClusterIP}
	}
	return compactManagedFields(obj)
}

func stripPodDisruptionBudget(obj any) (any, error) {
	if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
		pdb.Spec = policyv1.PodDisruptionBudgetSpec{}
	}
	return compactManagedFields(obj)
}

func stripNetworkPolicy(obj any) (any, error) {
	if np, ok := obj.(*networkingv1.NetworkPolicy); ok {
		np.Spec = networkingv1.NetworkPolicySpec{}
	}
	return compactManagedFields(obj)
}

func stripStatefulSet(obj any) (any, error) {
	sts, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return obj, nil
	}
	t := sts.Spec.Template
	kept := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: t.Labels, Annotations: t.Annotations}}
	for _, c := range t.Spec.Containers {
		kept.Spec.Containers = append(kept.Spec.Containers, corev1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources})
	}
	for _, c := range t.Spec.InitContainers {
		kept.Spec.InitContainers = append(kept.Spec.InitContainers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	sts.Spec = appsv1.StatefulSetSpec{Replicas: sts.Spec.Replicas, Selector: sts.Spec.Selector, ServiceName: sts.Spec.ServiceName, Template: kept}
	return compactManagedFields(obj)
}

// stripPod keeps of a pod what the operator reads from the cache: its
// metadata without managedFields, its status, and of its spec the node,
// the containers' names, images and arguments and the volumes' claims
// (the backup-store pod is judged by them). Environment, probes, mounts,
// security contexts, affinity and the rest go: the StatefulSet holds the
// template, and no cached pod is ever written back whole (pods are
// patched, deleted or read from the API server).
func stripPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.ManagedFields = nil
	spec := corev1.PodSpec{NodeName: pod.Spec.NodeName}
	for _, c := range pod.Spec.Containers {
		spec.Containers = append(spec.Containers, corev1.Container{Name: c.Name, Image: c.Image, Args: c.Args})
	}
	for _, c := range pod.Spec.InitContainers {
		spec.InitContainers = append(spec.InitContainers, corev1.Container{Name: c.Name, Image: c.Image, Args: c.Args})
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: v.PersistentVolumeClaim}})
		}
	}
	pod.Spec = spec
	return pod, nil
}
