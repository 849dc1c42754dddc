package plan

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/cacheops/cacheops/dayTwo/probe"
)

func evenLayout(n int) [][]probe.SlotRange {
	out := make([][]probe.SlotRange, n)
	for i := range n {
		out[i] = []probe.SlotRange{EvenSlots(i, n)}
	}
	return out
}

// restoringShards is a fresh cluster restoring a sharded backup of layout.
func restoringShards(c *redisCluster, layout [][]probe.SlotRange) Snapshot {
	s := c.snapshot()
	s.RestorePending = true
	s.Sharded.Restore = &ShardedRestore{Where: "s3://b/ns/c/b1/", Layout: layout}
	return s
}

func indexOf(steps []Action, typ ActionType) int {
	return slices.IndexFunc(steps, func(a Action) bool { return a.Type == typ })
}

// Each shard's first pod loaded its dump and, as Redis does for a node
// with keys in slots nobody serves, claimed the slots it holds keys of;
// bootstrap gives each shard the rest of the slots the backup recorded,
// and the restore is checked before any pod is labelled.
func TestShardedRestoreBootstrapsTheRecordedLayout(t *testing.T) {
	g := NewWithT(t)
	c := newRedisCluster(3, 2)
	c.nodes[0].slots = []probe.SlotRange{rng(0, 5000)}
	c.nodes[2].slots = []probe.SlotRange{rng(5462, 10000)}
	// Shard 2's dump held no key: its first pod claimed nothing.
	steps, end := c.run(t, restoringShards(c, evenLayout(3)))
	g.Expect(steps[len(steps)-1].Type).To(Equal(ActionNone), "%s", steps[len(steps)-1])
	var given []Action
	for _, a := range steps {
		if a.Type == ActionClusterAddSlots {
			given = append(given, a)
		}
	}
	g.Expect(given).To(HaveLen(3))
	g.Expect(given[0]).To(And(HaveField("Pod", "c-0"), HaveField("Slots", []probe.SlotRange{rng(5001, 5461)})))
	g.Expect(given[1]).To(And(HaveField("Pod", "c-2"), HaveField("Slots", []probe.SlotRange{rng(10001, 10922)})))
	g.Expect(given[2]).To(And(HaveField("Pod", "c-4"), HaveField("Slots", []probe.SlotRange{rng(10923, 16383)})))
	verify := indexOf(steps, ActionVerifyRestore)
	g.Expect(verify).To(BeNumerically(">", indexOf(steps, ActionClusterReplicate)))
	g.Expect(verify).To(BeNumerically("<", indexOf(steps, ActionLabelMaster)), "checked before any pod is labelled")
	g.Expect(steps[verify].Shards).To(HaveLen(3))
	served, err := ParseSlotStrings(steps[verify].Shards[1].Slots)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(served).To(Equal([]probe.SlotRange{rng(5462, 10922)}))
	g.Expect(steps[verify].Shards[1].Master).To(Equal("c-2"))
	g.Expect(indexOf(steps, ActionStartOperation)).To(Equal(-1), "the even layout moves nothing")
	g.Expect(end.Sharded.Recorded[2].Slots).To(Equal([]string{"10923-16383"}))
	g.Expect(end.RestorePending).To(BeFalse())
}

// A backup of a layout off the even spread is restored as it was, checked,
// then moved to the even layout like any layout the operator finds off it.
func TestShardedRestoreOfAnUnevenLayoutIsEvenedAfterTheCheck(t *testing.T) {
	g := NewWithT(t)
	c := newRedisCluster(3, 2)
	layout := [][]probe.SlotRange{
		{rng(0, 99), rng(200, 5461)},
		{rng(100, 199), rng(5462, 10922)},
		{rng(10923, 16383)},
	}
	steps, _ := c.run(t, restoringShards(c, layout))
	g.Expect(steps[len(steps)-1].Type).To(Equal(ActionNone), "%s", steps[len(steps)-1])
	first := indexOf(steps, ActionClusterAddSlots)
	g.Expect(steps[first].Slots).To(Equal(layout[0]))
	g.Expect(steps[first+1].Slots).To(Equal(layout[1]))
	verify, reshard := indexOf(steps, ActionVerifyRestore), indexOf(steps, ActionStartOperation)
	g.Expect(verify).To(BeNumerically(">=", 0))
	g.Expect(reshard).To(BeNumerically(">", verify), "the slots move after the check")
	g.Expect(steps[reshard].Reason).To(ContainSubstring("a restored backup's layout"))
	g.Expect(indexOf(steps, ActionSlotsMigrating)).To(BeNumerically(">", reshard))
	for i := range 3 {
		g.Expect(c.nodes[i*2].slots).To(Equal([]probe.SlotRange{EvenSlots(i, 3)}), "shard %d", i)
	}
}

func TestShardedRestoreRefusesOrWaits(t *testing.T) {
	tests := []struct {
		name     string
		restore  ShardedRestore
		down     int // a pod that does not answer; -1 for none
		want     ActionType
		wantText string
	}{
		{
			name:    "another shard count is refused, saying what to do",
			restore: ShardedRestore{Where: "s3://b/f/", Layout: evenLayout(4)}, down: -1,
			want:     ActionRefuseRestore,
			wantText: "s3://b/f/: the backup holds 4 shards and the cluster has 3: a sharded backup restores only into the same shard count; create the cluster with shards: 4, then change spec.shards to 3 (resharding moves the slots)",
		},
		{
			name:    "a slot given to two shards is refused",
			restore: ShardedRestore{Where: "s3://b/f/", Layout: [][]probe.SlotRange{{rng(0, 5461)}, {rng(5461, 10922)}, {rng(10923, 16383)}}}, down: -1,
			want:     ActionRefuseRestore,
			wantText: "s3://b/f/: the backup gives slot 5461 to shard 1 and to another shard",
		},
		{
			name:    "slots given to no shard are refused",
			restore: ShardedRestore{Where: "s3://b/f/", Layout: [][]probe.SlotRange{{rng(0, 5000)}, {rng(5462, 10922)}, {rng(10923, 16383)}}}, down: -1,
			want:     ActionRefuseRestore,
			wantText: "s3://b/f/: the backup gives slots 5001-5461 to no shard",
		},
		{
			name:    "a refused restore waits for a person",
			restore: ShardedRestore{Refused: "the backup holds 4 shards"}, down: -1,
			want: ActionWait, wantText: "restore refused: the backup holds 4 shards",
		},
		{
			name:    "the manifest cannot be read yet",
			restore: ShardedRestore{Err: "reading s3://b/f/manifest.json: not found"}, down: -1,
			want: ActionWait, wantText: "restore: reading the backup's manifest: reading s3://b/f/manifest.json: not found",
		},
		{
			name:    "a shard's first pod that has not loaded its dump is named",
			restore: ShardedRestore{Where: "s3://b/f/", Layout: evenLayout(3)}, down: 2,
			want: ActionWait, wantText: "restore: waiting for c-2 to load shard 1's dump (kubectl logs c-2 -c restore)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := newRedisCluster(3, 2)
			if tt.down >= 0 {
				c.nodes[tt.down].down = true
			}
			s := c.snapshot()
			s.RestorePending = tt.restore.Refused == ""
			r := tt.restore
			s.Sharded.Restore = &r
			a := Next(s)
			g.Expect(a.Type).To(Equal(tt.want), "%s", a)
			g.Expect(a.Reason).To(Equal(tt.wantText))
		})
	}
}

func TestParseSlotStrings(t *testing.T) {
	g := NewWithT(t)
	got, err := ParseSlotStrings([]string{"5462-10922", "0-5461", "16383"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal([]probe.SlotRange{rng(0, 10922), rng(16383, 16383)}))
	g.Expect(SlotStrings(got)).To(Equal([]string{"0-10922", "16383"}))
	for _, bad := range []string{"", "a-b", "5-3", "16384", "-1", "1-16384", "3-"} {
		_, err := ParseSlotStrings([]string{bad})
		g.Expect(err).To(HaveOccurred(), bad)
	}
}

// An operator restarted after the cluster was formed, with the bucket
// unreachable: the check is planned anyway (it retries, then records the
// failure) instead of holding the cluster.
func TestShardedRestoreFormedWithoutManifestIsChecked(t *testing.T) {
	g := NewWithT(t)
	c, s := formedCluster(t, 3, 2)
	s.RestorePending = true
	s.Sharded.Restore = &ShardedRestore{Err: "reading s3://b/f/manifest.json: connection refused"}
	a := Next(c.fresh(s))
	g.Expect(a.Type).To(Equal(ActionVerifyRestore), "%s", a)
}
