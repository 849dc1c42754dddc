package plan

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

func TestApproximateKeys(t *testing.T) {
	for n, want := range map[int64]int64{0: 0, 87: 87, 99: 99, 100: 100, 104: 100, 105: 110, 1234: 1200, 333412: 330000, 999999: 1000000} {
		if got := ApproximateKeys(n); got != want {
			t.Errorf("ApproximateKeys(%d) = %d, want %d", n, got, want)
		}
	}
	tests := []struct {
		recorded, n int64
		want        bool
	}{
		{0, 0, true}, {0, 100, true}, {0, 101, false},
		{330000, 333412, true}, {330000, 363000, true}, {330000, 363001, false}, {330000, 296999, false},
		{1200, 1320, true}, {1200, 1321, false}, {500, 600, true}, {500, 601, false},
	}
	for _, tt := range tests {
		if got := KeysNear(tt.recorded, tt.n); got != tt.want {
			t.Errorf("KeysNear(%d, %d) = %t, want %t", tt.recorded, tt.n, got, tt.want)
		}
	}
}

// status.shards[].approximateKeys follows the master's key count only when
// it has moved more than 10% (or 100 keys) away; a master that does not
// answer keeps what was recorded.
func TestShardKeysChangeRarely(t *testing.T) {
	g := NewWithT(t)
	c := newRedisCluster(3, 2)
	_, s := c.run(t, c.snapshot())
	setKeys := func(name string, n int) {
		nd := c.byName(name)
		nd.keys = map[int]int{nd.slots[0].Start: n}
	}
	setKeys("c-0", 10000)
	steps, s := c.run(t, s)
	g.Expect(stepTypes(steps)).To(Equal([]ActionType{ActionRecordShards, ActionNone}))
	g.Expect(s.Sharded.Recorded[0].ApproximateKeys).To(HaveValue(BeEquivalentTo(10000)))

	// 9% more, or fewer: nothing is written.
	for _, n := range []int{10900, 9100, 10000} {
		setKeys("c-0", n)
		steps, s = c.run(t, s)
		g.Expect(stepTypes(steps)).To(Equal([]ActionType{ActionNone}), "%d keys", n)
	}
	// 11% more: written, rounded.
	setKeys("c-0", 11123)
	steps, s = c.run(t, s)
	g.Expect(stepTypes(steps)).To(Equal([]ActionType{ActionRecordShards, ActionNone}))
	g.Expect(s.Sharded.Recorded[0].ApproximateKeys).To(HaveValue(BeEquivalentTo(11000)))

	// The master does not answer: its shard keeps what was recorded (the
	// failed-over shard is another test).
	snap := c.snapshot()
	snap.Sharded.Recorded = s.Sharded.Recorded
	snap.Pods[0].Obs.Reachable = false
	v := newShardedView(snap)
	g.Expect(v.shardKeys(0, "c-0")).To(HaveValue(BeEquivalentTo(11000)))
}

// kubectl cache plan --live of a shard-count change estimates the keys
// that move from the counts in status.shards; without them it gives the
// share of the slots only.
func TestSimulateReshardKeys(t *testing.T) {
	g := NewWithT(t)
	base := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: cachev1alpha1.CacheClusterSpec{Version: "7.0.15",
		Mode: cachev1alpha1.ModeSharded, Shards: ptr.To[int32](3)}}
	head := base.DeepCopy()
	head.Spec.Shards = ptr.To[int32](4)
	reason := func() string {
		steps, err := Simulate(base, head, "", false)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(steps).To(HaveLen(1))
		return steps[0].Reason
	}
	g.Expect(reason()).To(HavePrefix("spec.shards 3 → 4: 8193 of 16384 slots move (about 50% of the keys); shard 0 → 1"))

	// 3 → 4 moves 1366 of shard 0's 5462 slots, 2731 of shard 1's 5461
	// and 4096 of shard 2's 5461.
	base.Status.Shards = []cachev1alpha1.ShardStatus{
		{Index: 0, Slots: []string{"0-5461"}, ApproximateKeys: ptr.To[int64](330000)},
		{Index: 1, Slots: []string{"5462-10922"}, ApproximateKeys: ptr.To[int64](330000)},
		{Index: 2, Slots: []string{"10923-16383"}, ApproximateKeys: ptr.To[int64](660000)},
	}
	// 330000×1366/5462 + 330000×2731/5461 + 660000×4096/5461 = 82,531 +
	// 165,030 + 495,030 = 742,591.
	g.Expect(reason()).To(HavePrefix("spec.shards 3 → 4: 8193 of 16384 slots move (about 50% of the keys, about 740,000 keys by the counts in status.shards); shard 0 → 1"))

	// A shard whose count is unknown: the share only.
	base.Status.Shards[1].ApproximateKeys = nil
	g.Expect(reason()).To(HavePrefix("spec.shards 3 → 4: 8193 of 16384 slots move (about 50% of the keys); shard 0 → 1"))
}

// keysOf is the keys a model node holds.
func keysOf(n *modelNode) int {
	total := 0
	for _, k := range n.keys {
		total += k
	}
	return total
}
