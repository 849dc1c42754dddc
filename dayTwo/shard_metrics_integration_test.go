package daytwo_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// shardSeries reads the per-shard series of the cluster from the
// manager's registry: by metric name, by shard label.
func (c *cluster) shardSeries(g Gomega) map[string]map[string]float64 {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] != c.ns || labels["cluster"] != c.name || labels["shard"] == "" {
				continue
			}
			if out[f.GetName()] == nil {
				out[f.GetName()] = map[string]float64{}
			}
			out[f.GetName()][labels["shard"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

// expectEvenShardSeries: one series of each per-shard metric for each of
// the n shards and no other, each master serving its even share, none
// moving, every node saying cluster_state:ok.
func (c *cluster) expectEvenShardSeries(g Gomega, n int) {
	g.Eventually(func(g Gomega) {
		s := c.shardSeries(g)
		for _, name := range []string{"cacheops_shard_slots", "cacheops_shard_keys", "cacheops_shard_migrating_slots", "cacheops_shard_importing_slots", "cacheops_shard_cluster_state_ok"} {
			g.Expect(s[name]).To(HaveLen(n), name)
		}
		for i := range n {
			shard := strconv.Itoa(i)
			g.Expect(s["cacheops_shard_slots"][shard]).To(BeEquivalentTo(plan.EvenSlots(i, n).Len()), "shard %d", i)
			g.Expect(s["cacheops_shard_migrating_slots"][shard]).To(BeZero())
			g.Expect(s["cacheops_shard_importing_slots"][shard]).To(BeZero())
			g.Expect(s["cacheops_shard_cluster_state_ok"][shard]).To(BeEquivalentTo(1))
		}
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
}

// The per-shard series and status.shards' key counts follow what real
// redis-server processes report; they go with the cluster.
func TestIntegrationShardMetrics(t *testing.T) {
	t.Parallel()
	c := newCluster(t, shardedOpts(37))
	g := NewWithT(t)
	c.waitShards(g, formedShards)
	c.expectEvenShardSeries(g, 3)

	ctx := context.Background()
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.ips["cache-0"] + ":6379"}, Password: c.password})
	defer rc.Close()
	_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 3000 {
			p.Set(ctx, fmt.Sprintf("m:%05d", i), i, 0)
		}
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	keys := map[string]int64{}
	for i, sh := range formedShards {
		r := redisAt(c.ips[sh.Master], c.password)
		n, err := r.DBSize(ctx).Result()
		r.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(BeNumerically(">", 500), "the keys spread over the shards")
		keys[strconv.Itoa(i)] = n
	}
	g.Eventually(func(g Gomega) {
		s := c.shardSeries(g)
		for shard, n := range keys {
			g.Expect(s["cacheops_shard_keys"][shard]).To(BeEquivalentTo(n), "shard %s", shard)
		}
		for i, sh := range c.get(g).Status.Shards {
			g.Expect(sh.ApproximateKeys).To(HaveValue(Equal(plan.ApproximateKeys(keys[strconv.Itoa(i)]))), "status.shards[%d]", i)
		}
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())

	// A deleted cluster leaves no series.
	must(t, k8s.Delete(ctx, &cachev1alpha1.CacheCluster{ObjectMeta: metaOf(c.ns, c.name)}, client.PropagationPolicy("Background")))
	g.Eventually(func(g Gomega) {
		g.Expect(c.shardSeries(g)).To(BeEmpty())
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
}
