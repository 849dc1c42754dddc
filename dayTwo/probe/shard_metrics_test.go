package probe

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

func TestShardFigures(t *testing.T) {
	node := func(master bool, state string, slots []SlotRange, migrating, importing map[int]string) *ClusterView {
		return &ClusterView{State: state, Myself: ClusterNode{Master: master, Slots: slots, Migrating: migrating, Importing: importing}}
	}
	targets := []Target{
		{Pod: "c-0", Cluster: true, Shard: 0}, {Pod: "c-1", Cluster: true, Shard: 0},
		{Pod: "c-2", Cluster: true, Shard: 1}, {Pod: "c-3", Cluster: true, Shard: 1},
		{Pod: "c-4", Cluster: true, Shard: 2}, {Pod: "c-5", Cluster: true, Shard: 2},
		{Pod: "c-6", Cluster: true, Shard: 3}, {Pod: "c-7", Cluster: true, Shard: 3},
	}
	results := []Observation{
		// Shard 0 gives slots 4096-4100 to shard 1.
		{Pod: "c-0", Reachable: true, Keys: 900, Cluster: node(true, "ok", []SlotRange{{0, 5461}}, map[int]string{4096: "b", 4097: "b"}, nil)},
		{Pod: "c-1", Reachable: true, Keys: 900, Cluster: node(false, "ok", nil, nil, nil)},
		// Shard 1: its master is down, the replica took over but one
		// node still says fail.
		{Pod: "c-2", Err: "i/o timeout"},
		{Pod: "c-3", Reachable: true, Keys: 800, Cluster: node(true, "fail", []SlotRange{{5462, 10922}}, nil, map[int]string{4096: "a", 4097: "a"})},
		// Shard 2: nothing answers.
		{Pod: "c-4", Err: "refused"}, {Pod: "c-5", Err: "refused"},
		// Shard 3: new, its lead (a master without slots) imports.
		{Pod: "c-6", Reachable: true, Keys: 12, Cluster: node(true, "ok", nil, nil, map[int]string{12288: "c"})},
		{Pod: "c-7", Reachable: true, Cluster: node(true, "ok", nil, nil, nil)},
	}
	g := NewWithT(t)
	got := ShardFiguresOf(targets, results)
	g.Expect(got).To(Equal([]ShardFigures{
		{Shard: 0, Answered: true, Slots: 5462, Keys: 900, Migrating: 2, StateOK: true, master: "c-0"},
		{Shard: 1, Answered: true, Slots: 5461, Keys: 800, Importing: 2, StateOK: false, master: "c-3"},
		{Shard: 2},
		{Shard: 3, Answered: true, Slots: 0, Keys: 12, Importing: 1, StateOK: true, master: "c-6"},
	}))
	// A replication cluster has none.
	g.Expect(ShardFiguresOf([]Target{{Pod: "r-0"}}, []Observation{{Pod: "r-0", Reachable: true}})).To(BeEmpty())

	// The series: set for the shards probed, the last value kept for a
	// shard that did not answer, gone with the shard.
	key := types.NamespacedName{Namespace: "ns", Name: "c"}
	defer ForgetMetrics(key)
	exported := recordShardMetrics(key, got, nil)
	g.Expect(testutil.ToFloat64(shardSlots.WithLabelValues("ns", "c", "0"))).To(Equal(5462.0))
	g.Expect(testutil.ToFloat64(shardKeys.WithLabelValues("ns", "c", "1"))).To(Equal(800.0))
	g.Expect(testutil.ToFloat64(shardMigrating.WithLabelValues("ns", "c", "0"))).To(Equal(2.0))
	g.Expect(testutil.ToFloat64(shardImporting.WithLabelValues("ns", "c", "3"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(shardStateOK.WithLabelValues("ns", "c", "1"))).To(Equal(0.0))
	g.Expect(testutil.ToFloat64(shardStateOK.WithLabelValues("ns", "c", "2"))).To(Equal(0.0))
	g.Expect(testutil.CollectAndCount(shardSlots, "cacheops_shard_slots")).To(Equal(3), "no slots series for shard 2, which never answered")

	// Shard 3 is removed: its pods are no longer probed.
	exported = recordShardMetrics(key, ShardFiguresOf(targets[:6], results[:6]), exported)
	g.Expect(exported).To(HaveLen(3))
	for _, vec := range []interface{ DeleteLabelValues(...string) bool }{shardSlots, shardKeys, shardImporting, shardStateOK} {
		g.Expect(vec.DeleteLabelValues("ns", "c", "3")).To(BeFalse(), "shard 3's series are gone")
	}
	g.Expect(testutil.CollectAndCount(shardStateOK, "cacheops_shard_cluster_state_ok")).To(Equal(3))

	// The cluster is forgotten: nothing is left.
	ForgetMetrics(key)
	g.Expect(testutil.CollectAndCount(shardStateOK, "cacheops_shard_cluster_state_ok")).To(Equal(0))
	g.Expect(testutil.CollectAndCount(shardSlots, "cacheops_shard_slots")).To(Equal(0))
}
