//go:build e2e

package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/test/crdtest"
)

// Another team's CacheCluster that does not decode (stored under an older,
// looser CRD) is in the cluster while a neighbour's master is killed: the
// neighbour fails over as usual, with no acknowledged write lost; the bad
// object is reported, and its deletion completes.
func TestAnUndecodableClusterDoesNotStopANeighboursFailover(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	badNS := newNamespace(t, "e2e-iso-other-team")
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.cacheops.io/v1alpha1", "kind": "CacheCluster",
		"metadata": map[string]any{"name": "legacy", "namespace": badNS, "finalizers": []any{cachev1alpha1.Finalizer}},
		"spec":     crdtest.Undecodable(),
	}}
	g.Expect(crdtest.CreateUndecodable(ctx, env.Config(), bad, limits.PodRestart)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(eventsByReason(g, badNS)).To(HaveKey(cachev1alpha1.ReasonDecodeFailed))
	}, limits.ClusterReady, limits.Poll).Should(Succeed(), "the undecodable object is reported")

	ns := "e2e-iso-neighbour"
	failoverCase(t, ns, func(g Gomega, master string) {
		g.Expect(env.KillContainer(ns, master, "redis")).To(Succeed())
		g.Eventually(func(g Gomega) {
			cc := &cachev1alpha1.CacheCluster{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, cc)).To(Succeed())
			g.Expect(cc.Status.CurrentMaster).NotTo(Equal(master))
			g.Expect(cc.Status.CurrentMaster).NotTo(BeEmpty())
		}, limits.PodRestart, limits.Poll).Should(Succeed(), "the neighbour fails over")
	}, nil)
	g.Expect(eventsByReason(g, ns)).To(HaveKey(cachev1alpha1.EventFailoverCompleted))

	g.Expect(k8s.Delete(ctx, bad)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(bad), &cachev1alpha1.CacheCluster{}))
	}, limits.Cleanup, limits.Poll).Should(BeTrue(), "the undecodable object's deletion completes")
}
