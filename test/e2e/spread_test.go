//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// The real kube-scheduler places a cluster's pods as the rendered spread
// asks, on the suite's three nodes in three zones: a 3-pod cluster (the
// default, preferred spread) lands on three nodes in three zones; with
// spread: required a fourth pod has no node left to itself and stays
// Pending, unschedulable, while the other three run one per zone.
func TestSpreadOverZones(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-spread")

	placement := func(g Gomega, name string) (nodes, zones map[string]string, pending []corev1.Pod) {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{cachev1alpha1.LabelCluster: name})).To(Succeed())
		nodes, zones = map[string]string{}, map[string]string{}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				pending = append(pending, p)
				continue
			}
			node := &corev1.Node{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node)).To(Succeed())
			nodes[p.Spec.NodeName] = p.Name
			zones[node.Labels[corev1.LabelTopologyZone]] = p.Name
		}
		return nodes, zones, pending
	}

	basic := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, basic)).To(Succeed())
	waitRunning(g, basic)
	nodes, zones, _ := placement(g, basic.Name)
	g.Expect(nodes).To(HaveLen(3), "three pods on three nodes")
	g.Expect(zones).To(HaveLen(3), "three pods in three zones")
	t.Logf("preferred spread: pods by zone %v", zones)

	strict := loadExample(t, "basic", ns)
	strict.Name = "strict"
	strict.Spec.Replicas = ptrTo[int32](4)
	strict.Spec.Scheduling.Spread = cachev1alpha1.SpreadRequired
	g.Expect(k8s.Create(ctx, strict)).To(Succeed())
	g.Eventually(func(g Gomega) {
		nodes, zones, pending := placement(g, strict.Name)
		g.Expect(nodes).To(HaveLen(3))
		g.Expect(zones).To(HaveLen(3))
		g.Expect(pending).To(HaveLen(1))
		cond := podCondition(pending[0], corev1.PodScheduled)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(corev1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(corev1.PodReasonUnschedulable))
		t.Logf("required spread: %s pending: %s", pending[0].Name, cond.Message)
	}, limits.ClusterReady, limits.Poll).Should(Succeed(), notReadyPods(ns, "the strict cluster's pods were not placed one per node with the fourth Pending"))

	for _, cc := range []*cachev1alpha1.CacheCluster{strict, basic} {
		g.Expect(k8s.Delete(ctx, cc)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for _, cc := range []*cachev1alpha1.CacheCluster{strict, basic} {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(cc), &cachev1alpha1.CacheCluster{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), fmt.Sprintf("%s still exists", cc.Name))
		}
	}, limits.Cleanup, limits.Poll).Should(Succeed())
}

func podCondition(p corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
