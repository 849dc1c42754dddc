//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/test/aof"
)

// A master that restarts in place with a shorter history than its
// replicas must not become the source they follow (issue 13). The last
// writes are cut from the master's append-only file, at a command
// boundary, right before its process is killed: it restarts (within the
// probe timeout, so not as a down master) holding less than the replicas,
// which hold every acknowledged write. Following it, they would
// resynchronise in full and drop those writes; the cluster must fail over
// to one of them instead and lose nothing.
func TestMasterRestartedWithShorterHistory(t *testing.T) {
	t.Parallel()
	ns := "e2e-fo-restart"
	g := NewWithT(t)
	cc, before, w, masters := restartWithShorterHistory(t, g, ns, true)
	old := before.Status.CurrentMaster

	after := waitAllReplicating(g, cc)
	t.Logf("master %s → %s", old, after.Status.CurrentMaster)
	g.Expect(after.Status.CurrentMaster).NotTo(Equal(old), "the replicas hold more than the restarted master: one of them takes over")
	w.finish(t, g, masters)
}

// restartWithShorterHistory creates examples/basic (probe timeout 3 s, so
// the master restarts within it) under the sticky writer, cuts the last
// 500 writes from the master's append-only file and kills the master.
func restartWithShorterHistory(t *testing.T, g Gomega, ns string, autoFailover bool) (cc, before *cachev1alpha1.CacheCluster, w *workload, masters *masterWatch) {
	newNamespace(t, ns)
	cc = loadExample(t, "basic", ns)
	cc.Spec.HighAvailability.ProbeTimeoutSeconds = 3
	cc.Spec.HighAvailability.AutoFailover = ptr.To(autoFailover)
	g.Expect(k8s.Create(context.Background(), cc)).To(Succeed())
	before = waitReplicating(g, cc)
	masters = watchMasters(t, ns)
	t.Cleanup(masters.stop)
	w = startStickyWorkload(ns, "basic", password(g, ns, "basic"))
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 3000))

	old := before.Status.CurrentMaster
	file, err := aof.NewestIncr(filepath.Join(pvDir(g, ns, old), "appendonly"))
	g.Expect(err).NotTo(HaveOccurred())
	cut, err := aof.CutLastWrites(file, 500)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.KillContainer(ns, old, "redis")).To(Succeed())
	t.Logf("cut %d bytes of %s's append-only file, then killed it", cut, old)
	return cc, before, w, masters
}

// With automatic failover off, a master killed under the writer restarts
// in place (its last writes, acknowledged by the replicas, not yet in its
// append-only file: 500 cut from it). It comes up as a replica of nobody
// and refuses to be the replicas' sync source, so they keep every
// acknowledged write while the operator waits for a person and says so in
// a Warning Event; the restarted pod is not promoted. Turning automatic
// failover on is the person's answer: the replica holding the writes takes
// over and nothing acknowledged is lost.
func TestMasterRestartedWithAutoFailoverOffWaitsForAPerson(t *testing.T) {
	t.Parallel()
	ns := "e2e-fo-restart-off"
	g := NewWithT(t)
	cc, before, w, masters := restartWithShorterHistory(t, g, ns, false)
	old := before.Status.CurrentMaster

	g.Eventually(func(g Gomega) {
		g.Expect(eventsByReason(g, ns)).To(HaveKey(cachev1alpha1.EventMasterLacksData))
	}, limits.PodRestart, limits.Poll).Should(Succeed(), "a Warning Event asks a person to decide")
	// Still waiting: the restarted pod was not promoted, no replica
	// resynchronised from it.
	expectNoMaster(g, ns, before.Status.Nodes)
	e := eventsByReason(g, ns)[cachev1alpha1.EventMasterLacksData][0]
	g.Expect(e.Type).To(Equal(corev1.EventTypeWarning))
	g.Expect(e.Message).To(ContainSubstring("autoFailover: true"))
	t.Logf("event: %s", e.Message)

	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), cc)).To(Succeed())
	patch := client.MergeFrom(cc.DeepCopy())
	cc.Spec.HighAvailability.AutoFailover = ptr.To(true)
	g.Expect(k8s.Patch(context.Background(), cc, patch)).To(Succeed())
	after := waitAllReplicating(g, cc)
	t.Logf("master %s → %s", old, after.Status.CurrentMaster)
	g.Expect(after.Status.CurrentMaster).NotTo(Equal(old), "a replica holding the writes takes over")
	w.finish(t, g, masters)
}

// A master killed, then recreated with another address (its node lost,
// the pod rescheduled): its replicas still follow the old address. The
// operator recorded that address when the pod served writes there
// (status.currentMasterAddress), so the recreated pod, which lacks the
// last acknowledged writes, is judged against those replicas and not
// promoted; before, it was promoted and the replicas resynchronised from
// it and dropped those writes. Automatic failover is off for the first
// part, so the verdict can be watched: the operator waits for a person.
func TestMasterRecreatedAtAnotherAddressIsJudgedAgainstItsReplicas(t *testing.T) {
	t.Parallel()
	ns := "e2e-fo-readdress"
	g := NewWithT(t)
	cc, before, w, masters := restartWithShorterHistory(t, g, ns, false)
	old := before.Status.CurrentMaster
	g.Eventually(func(g Gomega) {
		g.Expect(eventsByReason(g, ns)).To(HaveKey(cachev1alpha1.EventMasterLacksData))
	}, limits.PodRestart, limits.Poll).Should(Succeed(), "the master restarted in place is not promoted")

	oldPod := pod(g, ns, old)
	oldIP := oldPod.Status.PodIP
	g.Expect(before.Status.CurrentMasterAddress).To(Equal(oldIP), "the address the master served writes at is recorded")
	g.Expect(k8s.Delete(context.Background(), oldPod)).To(Succeed())
	g.Eventually(func(g Gomega) {
		p := pod(g, ns, old)
		g.Expect(p.UID).NotTo(Equal(oldPod.UID))
		g.Expect(p.Status.PodIP).NotTo(BeEmpty())
		g.Expect(podReady(p)).To(BeTrue())
	}, limits.PodRestart, limits.Poll).Should(Succeed(), "the StatefulSet recreates the master's pod")
	newIP := pod(g, ns, old).Status.PodIP
	t.Logf("%s recreated: %s → %s", old, oldIP, newIP)
	g.Expect(newIP).NotTo(Equal(oldIP), "the recreated pod has another address")

	// Judged, not promoted: for many probe periods no pod becomes master
	// and the recorded address stays the old one.
	g.Consistently(func(g Gomega) {
		expectNoMaster(g, ns, before.Status.Nodes)
		got := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), got)).To(Succeed())
		g.Expect(got.Status.CurrentMasterAddress).To(Equal(oldIP))
	}, 10*time.Second, time.Second).Should(Succeed(), "the recreated master lacks acknowledged writes its replicas hold")

	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), cc)).To(Succeed())
	patch := client.MergeFrom(cc.DeepCopy())
	cc.Spec.HighAvailability.AutoFailover = ptr.To(true)
	g.Expect(k8s.Patch(context.Background(), cc, patch)).To(Succeed())
	after := waitAllReplicating(g, cc)
	t.Logf("master %s → %s", old, after.Status.CurrentMaster)
	g.Expect(after.Status.CurrentMaster).NotTo(Equal(old), "a replica holding the writes takes over")
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), got)).To(Succeed())
		g.Expect(got.Status.CurrentMasterAddress).To(Equal(pod(g, ns, got.Status.CurrentMaster).Status.PodIP))
	}, limits.PodRestart, limits.Poll).Should(Succeed(), "the new master's address is recorded")
	w.finish(t, g, masters)
}

// expectNoMaster: every pod of nodes answers as a replica.
func expectNoMaster(g Gomega, ns string, nodes []cachev1alpha1.NodeStatus) {
	pw := password(g, ns, "basic")
	for _, n := range nodes {
		rc := redisAt(pod(g, ns, n.PodName).Status.PodIP, pw)
		info, err := rc.Info(context.Background(), "replication").Result()
		rc.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info).To(ContainSubstring("role:slave\r\n"), n.PodName+" is no master while the operator waits")
	}
}
