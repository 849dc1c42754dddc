//go:build e2e

package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/gitops/argocd"
)

// health is what Argo CD (through our health.lua, in Argo CD's restricted
// Lua VM) and kstatus (Flux) say about the live object.
func health(g Gomega, cc *cachev1alpha1.CacheCluster) (argoStatus, argoMessage string, kstatus status.Status) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(cachev1alpha1.GroupVersion.WithKind("CacheCluster"))
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), u)).To(Succeed())
	st, msg, err := argocd.EvalHealth(argocd.HealthScript, u.Object)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := status.Compute(u)
	g.Expect(err).NotTo(HaveOccurred())
	return st, msg, res.Status
}

// The health check and kstatus read real objects the way the captured test
// data says: Healthy/Current when running, Degraded/Failed when stalled,
// Suspended when paused.
func TestHealthOfLiveObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-health")

	running := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, running)).To(Succeed())
	waitReplicating(g, running)
	g.Eventually(func(g Gomega) {
		st, _, ks := health(g, running)
		g.Expect(st).To(Equal("Healthy"))
		g.Expect(ks).To(Equal(status.CurrentStatus))
	}, limits.ClusterReady, limits.Poll).Should(Succeed())

	stalled := loadExample(t, "basic", ns)
	stalled.Name = "stalled"
	stalled.Spec.Auth.SecretRef = &cachev1alpha1.SecretKeyRef{Name: "does-not-exist"}
	g.Expect(k8s.Create(ctx, stalled)).To(Succeed())
	g.Eventually(func(g Gomega) {
		st, msg, ks := health(g, stalled)
		g.Expect(st).To(Equal("Degraded"))
		g.Expect(msg).To(ContainSubstring("does-not-exist"))
		g.Expect(ks).To(Equal(status.FailedStatus))
	}, limits.ClusterReady, limits.Poll).Should(Succeed())

	// Fixing the cause in git (here: creating the Secret) heals it.
	secret := &corev1.Secret{}
	secret.Name, secret.Namespace = "does-not-exist", ns
	secret.StringData = map[string]string{"password": "s3cret-s3cret"}
	g.Expect(k8s.Create(ctx, secret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		st, _, _ := health(g, stalled)
		g.Expect(st).To(Equal("Healthy"))
	}, limits.ClusterReady, limits.Poll).Should(Succeed())

	paused := &cachev1alpha1.CacheCluster{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(running), paused)).To(Succeed())
	patch := client.MergeFrom(paused.DeepCopy())
	paused.Spec.Paused = true
	g.Expect(k8s.Patch(ctx, paused, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		st, _, _ := health(g, running)
		g.Expect(st).To(Equal("Suspended"))
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
}
