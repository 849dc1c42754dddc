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
