//go:build e2e

package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
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
		"spec":     map[string]any{"version": "7.0.15", "highAvailability": map[string]any{"probeTimeoutSeconds": "fast"}},
	}}
	withLooseCRD(g, func() {
		g.Eventually(func() error { return k8s.Create(ctx, bad.DeepCopy()) }, limits.PodRestart, limits.Poll).Should(Succeed())
	})
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

// withLooseCRD runs fn while the CacheCluster CRD accepts any spec, as an
// older version of it might have, then puts today's CRD back.
func withLooseCRD(g Gomega, fn func()) {
	ctx := context.Background()
	s := kruntime.NewScheme()
	g.Expect(apiextensionsv1.AddToScheme(s)).To(Succeed())
	c, err := client.New(env.Config(), client.Options{Scheme: s})
	g.Expect(err).NotTo(HaveOccurred())
	key := client.ObjectKey{Name: "cacheclusters.cache.cacheops.io"}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(c.Get(ctx, key, crd)).To(Succeed())
	strict := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.DeepCopy()
	loose := strict.DeepCopy()
	loose.XValidations = nil
	loose.Properties["spec"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	set := func(schema *apiextensionsv1.JSONSchemaProps) {
		g.Eventually(func() error {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, key, got); err != nil {
				return err
			}
			got.Spec.Versions[0].Schema.OpenAPIV3Schema = schema
			return c.Update(ctx, got)
		}, limits.PodRestart, limits.Poll).Should(Succeed())
	}
	set(loose)
	defer func() {
		set(strict)
		// The API server switches schemas a moment after the update: wait
		// until today's schema refuses what the loose one took.
		probe := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cache.cacheops.io/v1alpha1", "kind": "CacheCluster",
			"metadata": map[string]any{"name": "schema-probe", "namespace": "default"},
			"spec":     map[string]any{"version": "7.0.15", "highAvailability": map[string]any{"probeTimeoutSeconds": "fast"}},
		}}
		g.Eventually(func() error {
			return k8s.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		}, limits.PodRestart, limits.Poll).ShouldNot(Succeed())
	}()
	fn()
}
