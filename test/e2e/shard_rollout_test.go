//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// shardedRestarts are the restarts of a rolling restart of examples/sharded
// (3 shards × 2 pods, each shard's first pod its master): the replicas
// from the highest ordinal, then each shard's old master after its
// switchover.
var shardedRestarts = []string{"sharded-5", "sharded-3", "sharded-1", "sharded-0", "sharded-2", "sharded-4"}

// predictShardedPlan is what `kubectl cache plan --live` says a change of
// examples/sharded's spec does: the restarts and the switchovers, in order.
func predictShardedPlan(t *testing.T, g Gomega, ns string, change func(*cachev1alpha1.CacheCluster)) (restarts, switchovers []string) {
	dir := t.TempDir()
	write := func(name string, cc *cachev1alpha1.CacheCluster) string {
		data, err := yaml.Marshal(cc)
		g.Expect(err).NotTo(HaveOccurred())
		path := filepath.Join(dir, name)
		g.Expect(os.WriteFile(path, data, 0o644)).To(Succeed())
		return path
	}
	base := loadExample(t, "sharded", ns)
	head := loadExample(t, "sharded", ns)
	change(head)
	out := kubectlCache(g, "plan", "--base", write("base.yaml", base), "--head", write("head.yaml", head), "--live", "--format", "json")
	var plans []struct {
		Operations []struct {
			Type        string   `json:"type"`
			Restarts    []string `json:"restarts"`
			Switchovers []string `json:"switchovers"`
		} `json:"operations"`
	}
	g.Expect(json.Unmarshal([]byte(out), &plans)).To(Succeed(), out)
	g.Expect(plans).To(HaveLen(1), out)
	for _, op := range plans[0].Operations {
		restarts = append(restarts, op.Restarts...)
		switchovers = append(switchovers, op.Switchovers...)
	}
	return restarts, switchovers
}

// upgradeDone waits for the OperationCompleted Event of an Upgrade and
// returns its time.
func upgradeDone(g Gomega, ns string) time.Time {
	var at time.Time
	g.Eventually(func(g Gomega) {
		found := false
		for _, e := range eventsByReason(g, ns)[cachev1alpha1.EventOperationDone] {
			if strings.HasPrefix(e.Message, "Upgrade") {
				found, at = true, eventTime(e)
			}
		}
		g.Expect(found).To(BeTrue())
	}, 2*limits.ClusterReady, limits.Poll).Should(Succeed(), "the upgrade completes")
	return at
}

// checkOnValkey: every pod of the cluster runs the real valkey-server
// 8.0.1, and no pod ever read RDB data it could not (a Redis pod that
// tried to follow a Valkey master).
func checkOnValkey(t *testing.T, g Gomega, cc *cachev1alpha1.CacheCluster) {
	for o := range cc.DesiredReplicas() {
		name := fmt.Sprintf("%s-%d", cc.Name, o)
		g.Expect(serverOf(g, cc.Namespace, cc.Name, name)).To(Equal("valkey 8.0.1"), name)
		g.Expect(pod(g, cc.Namespace, name).Annotations[cachev1alpha1.AnnotationEngine]).To(Equal("valkey"), name)
	}
	noUnreadableMaster(t, g, cc.Namespace)
}

// examples/sharded (3 shards × 2 pods) moves from Redis 7.0.15 to Valkey
// 8.0.1 under a cluster-aware writer that confirms every write with WAIT 1
// on the key's master: the pods restart in the order kubectl cache plan
// predicted — every shard's replica first, then each shard's old master
// after a CLUSTER FAILOVER to its upgraded replica — no acknowledged
// write and no preloaded key is lost, every slot is served by the even
// layout after, no slot is left importing or migrating, and every pod runs
// valkey-server.
func TestShardedRollingUpgradeUnderWrites(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-shard-upgrade")
	cc := loadExample(t, "sharded", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	waitShardsServing(g, cc)
	preloadSharded(g, cc, reshardKeys)
	uids := podUIDs(g, ns)
	w := writeDuringReshard(t, g, cc)

	toValkey := func(c *cachev1alpha1.CacheCluster) {
		c.Spec.Engine, c.Spec.Version = cachev1alpha1.EngineValkey, "8.0.1"
	}
	predicted, switchovers := predictShardedPlan(t, g, ns, toValkey)
	g.Expect(predicted).To(Equal(shardedRestarts))
	g.Expect(switchovers).To(Equal([]string{"sharded-0→sharded-1", "sharded-2→sharded-3", "sharded-4→sharded-5"}))

	start := time.Now()
	mergePatch(g, cc, `{"spec":{"engine":"valkey","version":"8.0.1"}}`)
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		g.Expect(got.Status.Phase).To(Equal(cachev1alpha1.PhaseUpgrading))
		g.Expect(got.Status.CurrentVersion).To(Equal("7.0.15"), "the version changes only when every pod runs it")
	}, limits.PodRestart, 50*time.Millisecond).Should(Succeed())
	capture(g, cc, "sharded-upgrading")
	done := upgradeDone(g, ns)
	took := done.Sub(start)
	pausedAt, pause := w.longestPauseAt(start, done)
	logTimeline(t, g, ns, start)
	t.Logf("longest write pause: %s from +%s", pause.Round(time.Millisecond), pausedAt.Sub(start).Round(time.Millisecond))
	// Each shard's switchover: from the step's Event to 3 s after its old
	// master's restart (SwitchoverSettle, then clients that still used
	// it).
	for _, sw := range switchoverWindows(g, ns, start) {
		at, p := w.longestPauseAt(sw.from, sw.to)
		t.Logf("%s: longest write pause %s from +%s", sw.name, p.Round(time.Millisecond), at.Sub(start).Round(time.Millisecond))
	}

	g.Expect(restartsInOrder(g, ns)).To(Equal(predicted), "the restarts kubectl cache plan predicted")
	for name, uid := range uids {
		g.Expect(pod(g, ns, name).UID).NotTo(Equal(uid), "%s was restarted", name)
	}
	// The pods' creation times (whole seconds) say the same order.
	created := podsCreated(g, ns)
	for i := 1; i < len(predicted); i++ {
		g.Expect(created[predicted[i]]).NotTo(BeTemporally("<", created[predicted[i-1]]), "%s was made before %s", predicted[i], predicted[i-1])
	}

	got := waitShardsServing(g, cc)
	g.Expect(got.Status.CurrentVersion).To(Equal("8.0.1"))
	for i, sh := range got.Status.Shards {
		g.Expect(sh.Master).To(Equal(fmt.Sprintf("sharded-%d", 2*i+1)), "shard %d is served by its upgraded replica", i)
	}
	checkResharded(g, cc)
	checkOnValkey(t, g, cc)
	ev := eventsByReason(g, ns)
	checked := map[string]bool{}
	for _, e := range ev[cachev1alpha1.EventDataChecked] {
		name, _, _ := strings.Cut(e.Message, " ")
		checked[name] = true
	}
	g.Expect(checked).To(HaveLen(6), "a data check of every restarted pod against its shard's master")
	g.Expect(ev[cachev1alpha1.EventDataCheckFailed]).To(BeEmpty())
	g.Expect(ev[cachev1alpha1.EventPrecheckPassed]).To(ContainElement(HaveField("Message", MatchRegexp(`valkey 8\.0\.1 starts with the configuration on a copy of the data of 10\.[0-9.]+:6379 and holds its [0-9]+ keys in database 0`))))

	again := w.ackedCount()
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", again+200), "writes are confirmed on the Valkey shards")
	checkNothingLost(t, g, cc, w)
	t.Logf("3 × 2 sharded redis 7.0.15 → valkey 8.0.1 under writes: %s, longest write pause %s", took.Round(time.Millisecond), pause.Round(time.Millisecond))
}

// logTimeline logs a rollout's Events in order, as offsets from start,
// to tell what a write pause overlapped.
func logTimeline(t *testing.T, g Gomega, ns string, start time.Time) {
	var all []corev1.Event
	for reason, events := range eventsByReason(g, ns) {
		switch reason {
		case cachev1alpha1.EventPodRestarted, cachev1alpha1.EventSwitchover, cachev1alpha1.EventDataChecked,
			cachev1alpha1.EventPrecheckPassed, cachev1alpha1.EventOperationStarted, cachev1alpha1.EventOperationDone:
			all = append(all, events...)
		}
	}
	sort.Slice(all, func(i, j int) bool { return eventTime(all[i]).Before(eventTime(all[j])) })
	for _, e := range all {
		if at := eventTime(e); !at.Before(start) {
			t.Logf("+%s %s: %s", at.Sub(start).Round(time.Millisecond), e.Reason, e.Message)
		}
	}
}

type window struct {
	name     string
	from, to time.Time
}

// switchoverWindows are, for each shard's switchover of a rollout, the
// time from its Switchover Event to 3 s after the restart of its old
// master.
func switchoverWindows(g Gomega, ns string, start time.Time) []window {
	ev := eventsByReason(g, ns)
	restarted := map[string]time.Time{}
	for _, e := range ev[cachev1alpha1.EventPodRestarted] {
		_, after, _ := strings.Cut(e.Message, "restarting ")
		name, _, _ := strings.Cut(after, " ")
		restarted[name] = eventTime(e)
	}
	var out []window
	for _, e := range ev[cachev1alpha1.EventSwitchover] {
		_, after, ok := strings.Cut(e.Message, ": switchover ")
		if !ok || eventTime(e).Before(start) {
			continue
		}
		pair, _, _ := strings.Cut(after, " ")
		from, _, _ := strings.Cut(pair, "→")
		if r, ok := restarted[from]; ok {
			out = append(out, window{name: "switchover " + pair, from: eventTime(e), to: r.Add(3 * time.Second)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].from.Before(out[j].from) })
	return out
}

// podsCreated is each cache pod's creation time.
func podsCreated(g Gomega, ns string) map[string]time.Time {
	pods := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), pods, client.InNamespace(ns), client.HasLabels{cachev1alpha1.LabelCluster})).To(Succeed())
	out := map[string]time.Time{}
	for _, p := range pods.Items {
		out[p.Name] = p.CreationTimestamp.Time
	}
	return out
}

// The operator dies right after its first CLUSTER FAILOVER of a rolling
// restart: the restarted operator no longer knows it sent it, reads from
// CLUSTER NODES that the replica serves the shard, and finishes the same
// upgrade: each pod restarts once, in the same order, nothing is lost.
func TestShardedOperatorKilledMidRollout(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-shard-upgrade-crash")
	t.Cleanup(func() {
		if t.Failed() {
			killManager()
			_ = startManager(managerBin, stateDir)
		}
	})
	killManager()
	g.Expect(startManager(managerBin, stateDir, "--watch-namespaces="+ns, "--fault-exit-after-step=ShardFailover")).To(Succeed())
	cc := loadExample(t, "sharded", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	waitShardsServing(g, cc)
	preloadSharded(g, cc, reshardKeys)
	w := writeDuringReshard(t, g, cc)

	mergePatch(g, cc, `{"spec":{"engine":"valkey","version":"8.0.1"}}`)
	code, err := managerExit(2 * limits.ClusterReady)
	g.Expect(err).NotTo(HaveOccurred(), "the manager exits after its first CLUSTER FAILOVER")
	g.Expect(code).To(Equal(3))
	half := getCC(g, cc)
	g.Expect(half.Status.Operation).NotTo(BeNil())
	g.Expect(half.Status.Operation.Step).To(Equal(cachev1alpha1.StepSwitchover))
	g.Expect(restartsInOrder(g, ns)).To(Equal(shardedRestarts[:3]), "the replicas restarted before the first switchover")

	g.Expect(startManager(managerBin, stateDir)).To(Succeed())
	upgradeDone(g, ns)
	g.Expect(restartsInOrder(g, ns)).To(Equal(shardedRestarts), "each pod restarted once, in order")
	checkResharded(g, cc)
	checkOnValkey(t, g, cc)
	checkNothingLost(t, g, cc, w)
}

// A live parameter and automatic failover turned off reach every node of
// a running sharded cluster without a restart: maxmemory-policy and
// cluster-replica-no-failover are set with CONFIG SET on every node.
func TestShardedConfigurationChangedLive(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-shard-config")
	cc := loadExample(t, "sharded", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	waitShardsServing(g, cc)
	pw := password(g, ns, cc.Name)
	pids := redisPIDs(g, ns, "sharded", 6)
	for name := range pids {
		g.Expect(configOf(g, ns, name, pw, "cluster-replica-no-failover")).To(Equal("no"), name)
	}

	mergePatch(g, cc, `{"spec":{"highAvailability":{"autoFailover":false},"config":{"maxmemory-policy":"allkeys-lru"}}}`)
	g.Eventually(func(g Gomega) {
		for name := range pids {
			g.Expect(configOf(g, ns, name, pw, "maxmemory-policy")).To(Equal("allkeys-lru"), name)
			g.Expect(configOf(g, ns, name, pw, "cluster-replica-no-failover")).To(Equal("yes"), name)
		}
		got := waitRunning(g, cc)
		g.Expect(got.Status.Operation).To(BeNil())
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
	expectSameProcesses(g, ns, pids, "kept its process")
	g.Expect(restartsInOrder(g, ns)).To(BeEmpty())
	applied := eventsByReason(g, ns)[cachev1alpha1.EventConfigApplied]
	g.Expect(applied).NotTo(BeEmpty())
	for _, e := range applied {
		t.Logf("%s", e.Message)
	}
	waitShardsServing(g, cc)
}
