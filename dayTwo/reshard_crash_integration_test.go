package daytwo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// A slot is half-moved (importing on shard 1's master, migrating on shard
// 0's, one key moved) when shard 0's master is killed: its replica wins
// the election and serves the slot with no migration state. Day-two
// finishes the slot towards the importing side, then moves it back to
// shard 0 (the even layout): no slot is left moving, no acknowledged
// write and no preloaded key is lost.
func TestIntegrationShardedSourceKilledMidMigration(t *testing.T) {
	t.Parallel()
	c := newCluster(t, shardedOpts(30))
	g := NewWithT(t)
	c.waitShards(g, formedShards)
	ctx := context.Background()
	w := c.startClusterWriter()
	const preloaded = 3000
	_, err := w.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range preloaded {
			p.Set(ctx, fmt.Sprintf("pre:%06d", i), i, 0)
		}
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(w.ackedCount).WithTimeout(deadline).WithPolling(poll).Should(BeNumerically(">", 200))

	// Day-two stands aside while the test cuts a migration off.
	pause := func(p bool) {
		cc := c.get(g)
		patch := client.MergeFrom(cc.DeepCopy())
		cc.Spec.Paused = p
		g.Expect(k8s.Patch(ctx, cc, patch)).To(Succeed())
	}
	pause(true)
	time.Sleep(time.Second)
	src, tgt := redisAt(c.ips["cache-0"], c.password), redisAt(c.ips["cache-2"], c.password)
	defer src.Close()
	defer tgt.Close()
	srcID, err := src.ClusterMyID(ctx).Result()
	g.Expect(err).NotTo(HaveOccurred())
	tgtID, err := tgt.ClusterMyID(ctx).Result()
	g.Expect(err).NotTo(HaveOccurred())
	slot := -1
	for s := range 5462 {
		if n, _ := src.ClusterCountKeysInSlot(ctx, s).Result(); n >= 2 {
			slot = s
			break
		}
	}
	g.Expect(slot).To(BeNumerically(">=", 0))
	g.Expect(tgt.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err()).To(Succeed())
	g.Expect(src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", tgtID).Err()).To(Succeed())
	keys, err := src.ClusterGetKeysInSlot(ctx, slot, 1).Result()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(src.Do(ctx, "MIGRATE", c.ips["cache-2"], "6379", "", 0, 5000, "AUTH", c.password, "KEYS", keys[0]).Err()).To(Succeed())
	g.Expect(src.Do(ctx, "WAIT", 1, 1000).Err()).To(Succeed())
	c.redis["cache-0"].kill()
	// Shard 0's replica takes over with the slot and without its
	// migration state.
	g.Eventually(func(g Gomega) {
		r := redisAt(c.ips["cache-1"], c.password)
		defer r.Close()
		role, err := r.Do(ctx, "ROLE").Slice()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(role[0]).To(Equal("master"))
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	pause(false)

	c.redis["cache-0"].start(t)
	want := []cachev1alpha1.ShardStatus{
		{Index: 0, Slots: []string{"0-5461"}, Master: "cache-1", Replicas: []string{"cache-0"}}, formedShards[1], formedShards[2]}
	c.waitShards(g, want)
	c.checkLayout(g, want)
	w.Stop()
	checked, lost := w.lost(g, c)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	t.Logf("slot %d repaired; %d acknowledged writes checked, 0 lost", slot, checked)
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.ips["cache-2"] + ":6379"}, Password: c.password})
	defer rc.Close()
	for i := range preloaded {
		g.Expect(rc.Get(ctx, fmt.Sprintf("pre:%06d", i)).Int()).To(Equal(i), "pre:%06d", i)
	}
}
