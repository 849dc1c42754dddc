package daytwo_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// resize plays day-one and the StatefulSet controller out once day-two
// approves a pod count: the pods of a new shard are created (their
// redis-server already runs), a removed shard's are deleted and their
// redis-server stopped.
func (c *cluster) resize(g Gomega, want int) {
	ctx := context.Background()
	g.Eventually(func(g Gomega) {
		r := c.get(g).Status.Rollout
		g.Expect(r).NotTo(BeNil())
		g.Expect(r.Replicas).To(Equal(int32(want)))
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed(), "day-two approves %d pods", want)
	sts := &appsv1.StatefulSet{}
	must(c.t, k8s.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: c.name}, sts))
	sts.Spec.Replicas = ptr.To(int32(want))
	must(c.t, k8s.Update(ctx, sts))
	c.settleStatefulSet()
	for len(c.pods) < want {
		name := c.spare[0]
		c.spare = c.spare[1:]
		c.pods = append(c.pods, name)
		c.createPod(name)
	}
	for len(c.pods) > want {
		name := c.pods[len(c.pods)-1]
		c.pods = c.pods[:len(c.pods)-1]
		must(c.t, k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metaOf(c.ns, name)}, client.GracePeriodSeconds(0)))
		c.redis[name].kill()
	}
}

// setShards changes spec.shards.
func (c *cluster) setShards(g Gomega, n int32) {
	cc := c.get(g)
	patch := client.MergeFrom(cc.DeepCopy())
	cc.Spec.Shards = ptr.To(n)
	g.Expect(k8s.Patch(context.Background(), cc, patch)).To(Succeed())
}

func evenShards(n int) []cachev1alpha1.ShardStatus {
	out := make([]cachev1alpha1.ShardStatus, n)
	for i := range out {
		out[i] = cachev1alpha1.ShardStatus{Index: int32(i), Slots: []string{plan.EvenSlots(i, n).String()},
			Master: fmt.Sprintf("cache-%d", 2*i), Replicas: []string{fmt.Sprintf("cache-%d", 2*i+1)}}
	}
	return out
}

// checkLayout: no operation left, every master holds keys of its own
// slots only, no node shows a slot moving, every node knows exactly the
// nodes of the layout. It returns the keys by slot.
func (c *cluster) checkLayout(g Gomega, shards []cachev1alpha1.ShardStatus) []int64 {
	ctx := context.Background()
	keys := make([]int64, cachev1alpha1.SlotCount)
	g.Eventually(func(g Gomega) {
		g.Expect(c.get(g).Status.Operation).To(BeNil())
		for _, p := range c.pods {
			rc := redisAt(c.ips[p], c.password)
			nodes, err := rc.ClusterNodes(ctx).Result()
			rc.Close()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(nodes).NotTo(Or(ContainSubstring("->-"), ContainSubstring("-<-")), p)
			g.Expect(strings.Count(strings.TrimSpace(nodes), "\n")+1).To(Equal(len(c.pods)), "%s knows the nodes of the layout only:\n%s", p, nodes)
		}
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	for i, sh := range shards {
		r := plan.EvenSlots(i, len(shards))
		rc := redisAt(c.ips[sh.Master], c.password)
		cmds := make([]*redis.IntCmd, cachev1alpha1.SlotCount)
		_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for s := range cmds {
				cmds[s] = p.ClusterCountKeysInSlot(ctx, s)
			}
			return nil
		})
		rc.Close()
		g.Expect(err).NotTo(HaveOccurred())
		for s, cmd := range cmds {
			if s < r.Start || s > r.End {
				g.Expect(cmd.Val()).To(BeZero(), "%s holds keys of slot %d", sh.Master, s)
				continue
			}
			keys[s] = cmd.Val()
		}
	}
	return keys
}

func movedKeys(keys []int64, from, to int) int64 {
	var n int64
	for s, k := range keys {
		if plan.TargetShard(s, from) != plan.TargetShard(s, to) {
			n += k
		}
	}
	return n
}

// 3 shards → 4 → 3 on real redis-server processes under a cluster-aware
// writer confirming every write with WAIT 1: the new shard's pods are
// added, slots move to the even layout in bounded batches, the removed
// shard is emptied and forgotten before its pods go, no acknowledged
// write and no preloaded key is lost.
func TestIntegrationShardedReshard(t *testing.T) {
	t.Parallel()
	opts := shardedOpts(29)
	opts.pods, opts.objects = 8, 6
	c := newCluster(t, opts)
	g := NewWithT(t)
	c.waitShards(g, formedShards)
	ctx := context.Background()
	const preloaded = 20000
	w := c.startClusterWriter()
	for start := 0; start < preloaded; start += 1000 {
		_, err := w.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := start; i < start+1000; i++ {
				p.Set(ctx, fmt.Sprintf("pre:%06d", i), i, 0)
			}
			return nil
		})
		g.Expect(err).NotTo(HaveOccurred())
	}
	before := c.checkLayout(g, formedShards)
	g.Eventually(w.ackedCount).WithTimeout(deadline).WithPolling(poll).Should(BeNumerically(">", 200))

	start := time.Now()
	c.setShards(g, 4)
	c.resize(g, 8)
	c.waitShards(g, evenShards(4))
	up := c.checkLayout(g, evenShards(4))
	c.expectEvenShardSeries(g, 4)
	took := time.Since(start)
	moved := movedKeys(before, 3, 4)
	t.Logf("3 → 4 shards: %s, %d keys moved, %.0f keys/s", took.Round(time.Millisecond), moved, float64(moved)/took.Seconds())

	acked := w.ackedCount()
	g.Eventually(w.ackedCount).WithTimeout(deadline).WithPolling(poll).Should(BeNumerically(">", acked+100), func() string { return "writes on 4 shards; last error: " + w.lastError() })
	start = time.Now()
	c.setShards(g, 3)
	c.resize(g, 6)
	c.waitShards(g, formedShards)
	c.checkLayout(g, formedShards)
	took = time.Since(start)
	// The removed shard's series went with its pods.
	c.expectEvenShardSeries(g, 3)
	moved = movedKeys(up, 4, 3)
	t.Logf("4 → 3 shards: %s, %d keys moved, %.0f keys/s", took.Round(time.Millisecond), moved, float64(moved)/took.Seconds())

	w.Stop()
	checked, lost := w.lost(g, c)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	t.Logf("%d acknowledged writes checked, 0 lost", checked)
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.ips["cache-0"] + ":6379"}, Password: c.password})
	defer rc.Close()
	for i := range preloaded {
		g.Expect(rc.Get(ctx, fmt.Sprintf("pre:%06d", i)).Int()).To(Equal(i))
	}
	ev := c.events(g)
	g.Expect(ev[cachev1alpha1.EventSlotsMoving]).NotTo(BeEmpty())
	g.Expect(ev[cachev1alpha1.EventShardAdded]).NotTo(BeEmpty())
	g.Expect(ev[cachev1alpha1.EventShardRemoved]).NotTo(BeEmpty())
}
