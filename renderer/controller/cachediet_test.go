package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// TestTheCacheHoldsNoManagedFields: the API server keeps managedFields;
// the manager's cache drops them from the CacheCluster and its children,
// and a Secret the operator does not own is not in the cache at all.
func TestTheCacheHoldsNoManagedFields(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cc := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	foreign := &corev1.Secret{}
	foreign.Namespace, foreign.Name = ns, "someone-elses"
	g.Expect(k8s.Create(ctx, foreign)).To(Succeed())

	for _, obj := range []client.Object{&cachev1alpha1.CacheCluster{}, &appsv1.StatefulSet{}, &corev1.Service{}, &corev1.Secret{}} {
		key := client.ObjectKey{Namespace: ns, Name: "basic"}
		if _, ok := obj.(*corev1.Secret); ok {
			key.Name = "basic-auth"
		}
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, key, obj)).To(Succeed())
			g.Expect(obj.GetManagedFields()).NotTo(BeEmpty(), "the API server's copy of %T", obj)
			g.Expect(mgrCache.Get(ctx, key, obj)).To(Succeed())
			g.Expect(obj.GetManagedFields()).To(BeEmpty(), "the cached %T", obj)
		}, timeout, interval).Should(Succeed())
	}
	list := &corev1.SecretList{}
	g.Expect(mgrCache.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	for _, s := range list.Items {
		g.Expect(s.Name).NotTo(Equal(foreign.Name), "a Secret cacheops does not own is not cached")
	}
}

// TestTheCacheKeepsOnlyWhatIsReadOfAPod: a cached pod keeps its status
// and, of its spec, the containers' names, images and arguments and the
// claims it mounts; its environment, probes and other volumes are not
// held in memory.
func TestTheCacheKeepsOnlyWhatIsReadOfAPod(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = ns, "basic-0"
	pod.Labels = map[string]string{cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue, cachev1alpha1.LabelCluster: "basic"}
	pod.Spec = corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "redis", Image: "redis:7.0.15", Args: []string{"--key-prefix=x/"},
			Env:            []corev1.EnvVar{{Name: "REDIS_PASSWORD", Value: "not cached"}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"redis-cli", "ping"}}}},
		}},
		Volumes: []corev1.Volume{
			{Name: "backups", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "store"}}},
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "basic"}}}},
		},
	}
	g.Expect(k8s.Create(ctx, pod)).To(Succeed())
	cached := &corev1.Pod{}
	g.Eventually(func() error { return mgrCache.Get(ctx, client.ObjectKeyFromObject(pod), cached) }, timeout, interval).Should(Succeed())
	g.Expect(cached.ManagedFields).To(BeEmpty())
	g.Expect(cached.Spec.Containers).To(Equal([]corev1.Container{{Name: "redis", Image: "redis:7.0.15", Args: []string{"--key-prefix=x/"}}}))
	g.Expect(cached.Spec.Volumes).To(Equal([]corev1.Volume{pod.Spec.Volumes[0]}))
	g.Expect(cached.Status.Phase).To(Equal(corev1.PodPending), "the status is kept")
}
