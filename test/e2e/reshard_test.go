//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// reshardKeys is the data set a resharding test moves (besides what its
// writer adds).
const reshardKeys = 20000

// preloadSharded writes n keys through a cluster-aware client, pipelined.
func preloadSharded(g Gomega, cc *cachev1alpha1.CacheCluster, n int) {
	ctx := context.Background()
	rc := clusterClient(g, cc)
	defer rc.Close()
	for start := 0; start < n; start += 1000 {
		_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := start; i < min(start+1000, n); i++ {
				p.Set(ctx, fmt.Sprintf("pre:%07d", i), fmt.Sprintf("v%d", i), 0)
			}
			return nil
		})
		g.Expect(err).NotTo(HaveOccurred())
	}
}

// setShards changes spec.shards.
func setShards(g Gomega, cc *cachev1alpha1.CacheCluster, n int32) {
	got := getCC(g, cc)
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Shards = ptr.To(n)
	g.Expect(k8s.Patch(context.Background(), got, patch)).To(Succeed())
	cc.Spec.Shards = ptr.To(n)
}

// slotKeys is CLUSTER COUNTKEYSINSLOT of every slot on a pod's node.
func slotKeys(g Gomega, rc *redis.Client) []int64 {
	ctx := context.Background()
	cmds := make([]*redis.IntCmd, cachev1alpha1.SlotCount)
	_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for s := range cmds {
			cmds[s] = p.ClusterCountKeysInSlot(ctx, s)
		}
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	out := make([]int64, len(cmds))
	for s, c := range cmds {
		out[s] = c.Val()
	}
	return out
}

// checkResharded: the cluster is Running with n shards in the even
// layout, no operation left, no node shows a slot importing or
// migrating, and every master holds keys only of the slots it serves.
// It returns the keys by slot.
func checkResharded(g Gomega, cc *cachev1alpha1.CacheCluster) []int64 {
	waitShardsServing(g, cc)
	n := int(cc.ShardCount())
	keys := make([]int64, cachev1alpha1.SlotCount)
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		g.Expect(got.Status.Operation).To(BeNil())
		g.Expect(got.Status.Rollout.Replicas).To(Equal(cc.DesiredReplicas()))
		pods, err := k8sPods(cc)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(HaveLen(int(cc.DesiredReplicas())), "the removed shards' pods are gone")
		g.Expect(got.Status.Shards).To(HaveLen(n))
		for i, sh := range got.Status.Shards {
			g.Expect(sh.Slots).To(Equal([]string{plan.EvenSlots(i, n).String()}), "shard %d serves its even share", i)
			ip := pod(g, cc.Namespace, sh.Master).Status.PodIP
			rc := operatorAt(g, cc, ip)
			defer rc.Close()
			nodes, err := rc.ClusterNodes(context.Background()).Result()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(nodes).NotTo(ContainSubstring("->-"), "%s shows a slot migrating", sh.Master)
			g.Expect(nodes).NotTo(ContainSubstring("-<-"), "%s shows a slot importing", sh.Master)
			g.Expect(strings.Count(strings.TrimSpace(nodes), "\n")+1).To(Equal(int(cc.DesiredReplicas())), "%s knows exactly the nodes of the layout:\n%s", sh.Master, nodes)
			r := plan.EvenSlots(i, n)
			for s, k := range slotKeys(g, rc) {
				if s < r.Start || s > r.End {
					g.Expect(k).To(BeZero(), "%s holds keys of slot %d, which shard %d does not serve", sh.Master, s, i)
					continue
				}
				keys[s] = k
			}
		}
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
	return keys
}

// k8sPods lists the cache pods of a cluster.
func k8sPods(cc *cachev1alpha1.CacheCluster) ([]string, error) {
	var out []string
	list := &corev1.PodList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(cc.Namespace), client.MatchingLabels{cachev1alpha1.LabelCluster: cc.Name}); err != nil {
		return nil, err
	}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	return out, nil
}

// writeDuringReshard starts the WAIT-confirmed writer (stopped at the
// test's end at the latest) and waits until it confirms writes.
func writeDuringReshard(t *testing.T, g Gomega, cc *cachev1alpha1.CacheCluster) *shardWriter {
	w := startShardWriter(g, cc)
	t.Cleanup(w.Stop)
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 200))
	return w
}

// checkNothingLost stops the writer and reads back every acknowledged
// write and a sample of the preloaded keys.
func checkNothingLost(t *testing.T, g Gomega, cc *cachev1alpha1.CacheCluster, w *shardWriter) {
	w.Stop()
	checked, lost := w.Verify(g, cc)
	g.Expect(lost).To(BeEmpty(), "%d of %d acknowledged writes lost", len(lost), checked)
	t.Logf("%d acknowledged writes checked, 0 lost", checked)
	rc := clusterClient(g, cc)
	defer rc.Close()
	ctx := context.Background()
	for i := 0; i < reshardKeys; i += 97 {
		g.Expect(rc.Get(ctx, fmt.Sprintf("pre:%07d", i)).Val()).To(Equal(fmt.Sprintf("v%d", i)))
	}
}

// movedKeys counts the keys of the slots whose shard differs between two
// layouts of from and to shards.
func movedKeys(keys []int64, from, to int) int64 {
	var n int64
	for s, k := range keys {
		if plan.TargetShard(s, from) != plan.TargetShard(s, to) {
			n += k
		}
	}
	return n
}

// 3 shards → 4 → 3 under a cluster-aware writer that confirms every write
// with WAIT 1: after each step every slot is served by its shard of the
// even layout, no slot is left importing or migrating, every key lives on
// the master of its slot, the removed shard's nodes are forgotten and its
// pods gone, and no acknowledged write is lost.
func TestShardedReshardUpAndDownUnderWrites(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-reshard")
	cc := loadExample(t, "sharded", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	waitShardsServing(g, cc)
	preloadSharded(g, cc, reshardKeys)
	before := checkResharded(g, cc)
	w := writeDuringReshard(t, g, cc)

	start := time.Now()
	setShards(g, cc, 4)
	g.Eventually(func(g Gomega) {
		g.Expect(getCC(g, cc).Status.Phase).To(Equal(cachev1alpha1.PhaseScaling))
	}, limits.ClusterReady, 50*time.Millisecond).Should(Succeed(), "the cluster is Scaling while slots move")
	up := checkResharded(g, cc)
	tookUp := time.Since(start)
	movedUp := movedKeys(before, 3, 4)
	t.Logf("3 → 4 shards: %s, %d keys in moved slots (before the writer's), %.0f keys/s over the whole operation", tookUp.Round(time.Millisecond), movedUp, float64(movedUp)/tookUp.Seconds())

	again := w.ackedCount()
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", again+200), "writes are confirmed on 4 shards")
	start = time.Now()
	setShards(g, cc, 3)
	checkResharded(g, cc)
	tookDown := time.Since(start)
	movedDown := movedKeys(up, 4, 3)
	t.Logf("4 → 3 shards: %s, %d keys in moved slots, %.0f keys/s over the whole operation", tookDown.Round(time.Millisecond), movedDown, float64(movedDown)/tookDown.Seconds())

	checkNothingLost(t, g, cc, w)
	ev := eventsByReason(g, ns)
	g.Expect(ev[cachev1alpha1.EventSlotsMoving]).NotTo(BeEmpty())
	g.Expect(ev[cachev1alpha1.EventShardAdded]).NotTo(BeEmpty())
	g.Expect(ev[cachev1alpha1.EventShardRemoved]).NotTo(BeEmpty())
}

// The operator dies right after its first MIGRATE step, slots marked
// migrating on the source and importing on the target; the restarted
// operator reads the markers back from the nodes and finishes: the
// cluster reaches 4 shards in the even layout, no slot is left moving,
// no acknowledged write is lost.
func TestShardedOperatorKilledMidMigration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-reshard-crash")
	t.Cleanup(func() {
		if t.Failed() {
			killManager()
			_ = startManager(managerBin, stateDir)
		}
	})
	killManager()
	g.Expect(startManager(managerBin, stateDir, "--watch-namespaces="+ns, "--fault-exit-after-step=MigrateKeys")).To(Succeed())
	cc := loadExample(t, "sharded", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	waitShardsServing(g, cc)
	preloadSharded(g, cc, reshardKeys)
	w := writeDuringReshard(t, g, cc)

	setShards(g, cc, 4)
	code, err := managerExit(limits.ClusterReady)
	g.Expect(err).NotTo(HaveOccurred(), "the manager exits after the first MIGRATE step")
	g.Expect(code).To(Equal(3))
	// Halfway: a slot is marked migrating on some node, the operation is
	// recorded with its plan.
	half := getCC(g, cc)
	g.Expect(half.Status.Operation).NotTo(BeNil())
	g.Expect(half.Status.Operation.Resharding).NotTo(BeNil())
	g.Expect(half.Status.Operation.Resharding.SlotsToMove).To(Equal(int32(8193)))
	pw := password(g, ns, cc.Name)
	marked := false
	for o := range 8 {
		rc := redisAt(pod(g, ns, fmt.Sprintf("%s-%d", cc.Name, o)).Status.PodIP, pw)
		nodes, err := rc.ClusterNodes(ctx).Result()
		rc.Close()
		g.Expect(err).NotTo(HaveOccurred())
		marked = marked || strings.Contains(nodes, "->-")
	}
	g.Expect(marked).To(BeTrue(), "a slot is left migrating")

	g.Expect(startManager(managerBin, stateDir)).To(Succeed())
	checkResharded(g, cc)
	checkNothingLost(t, g, cc, w)
}
