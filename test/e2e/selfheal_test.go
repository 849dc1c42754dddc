//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// Two of three pods wedged (frozen): the cluster turns Degraded, then Failed
// with reason MajorityDown once that lasts (10s in this suite), and the
// wedged replicas are recreated (after 20s not Ready in this suite), after
// which the cluster runs again.
func TestSelfHealingOfWedgedReplicas(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-selfheal")
	cc := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	got := waitReplicating(g, cc)

	uids := map[string]types.UID{}
	for _, n := range got.Status.Nodes {
		if n.PodName == got.Status.CurrentMaster {
			continue
		}
		uids[n.PodName] = pod(g, ns, n.PodName).UID
		g.Expect(env.Freeze(ns, n.PodName, "redis")).To(Succeed())
	}
	g.Expect(uids).To(HaveLen(2))

	g.Eventually(func(g Gomega) {
		g.Expect(getCC(g, cc).Status.Phase).To(Equal(cachev1alpha1.PhaseDegraded))
	}, limits.PodRestart, 100*time.Millisecond).Should(Succeed())
	capture(g, cc, "degraded")

	g.Eventually(func(g Gomega) {
		now := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cc), now)).To(Succeed())
		g.Expect(now.Status.Phase).To(Equal(cachev1alpha1.PhaseFailed))
		deg := meta.FindStatusCondition(now.Status.Conditions, cachev1alpha1.ConditionDegraded)
		g.Expect(deg).NotTo(BeNil())
		g.Expect(deg.Reason).To(Equal(cachev1alpha1.ReasonMajorityDown))
		g.Expect(deg.Message).To(ContainSubstring("2 of 3 pods have been down"))
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	capture(g, cc, "failed-majority-down")

	// Recreated on their volumes, the replicas come back and the cluster runs.
	g.Eventually(func(g Gomega) {
		for name, uid := range uids {
			g.Expect(pod(g, ns, name).UID).NotTo(Equal(uid), "%s was not recreated", name)
		}
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	waitReplicating(g, cc)

	// Similar Events are merged into one series; the UIDs above prove both
	// pods were recreated.
	reasons := eventsByReason(g, ns)
	g.Expect(reasons).To(HaveKey(cachev1alpha1.EventPodRecreated))
	g.Expect(reasons).To(HaveKey(cachev1alpha1.ReasonMajorityDown))
}
