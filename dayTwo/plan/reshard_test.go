package plan

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

func TestPlanMoves(t *testing.T) {
	g := NewWithT(t)
	even := func(n int) []int {
		owner := make([]int, cachev1alpha1.SlotCount)
		for s := range owner {
			owner[s] = TargetShard(s, n)
		}
		return owner
	}
	g.Expect(PlanMoves(even(3), 3)).To(BeEmpty())
	up := PlanMoves(even(3), 4)
	g.Expect(up).To(Equal([]SlotMove{
		{From: 0, To: 1, Slots: []probe.SlotRange{rng(4096, 5461)}},
		{From: 1, To: 2, Slots: []probe.SlotRange{rng(8192, 10922)}},
		{From: 2, To: 3, Slots: []probe.SlotRange{rng(12288, 16383)}},
	}))
	g.Expect(countSlots(up)).To(Equal(8193))
	// Scale-down empties the removed shard first.
	down := PlanMoves(even(4), 3)
	g.Expect(down[0]).To(Equal(SlotMove{From: 3, To: 2, Slots: []probe.SlotRange{rng(12288, 16383)}}))
	g.Expect(down[1:]).To(Equal([]SlotMove{
		{From: 1, To: 0, Slots: []probe.SlotRange{rng(4096, 5461)}},
		{From: 2, To: 1, Slots: []probe.SlotRange{rng(8192, 10922)}},
	}))
	// Unserved slots are not moves (bootstrap gives them).
	owner := even(3)
	owner[7] = -1
	g.Expect(PlanMoves(owner, 3)).To(BeEmpty())
	st := MovesStatus(3, 4, up)
	g.Expect(st.SlotsToMove).To(Equal(int32(8193)))
	g.Expect(st.Moves[2]).To(Equal(cachev1alpha1.SlotMove{From: 2, To: 3, Slots: []string{"12288-16383"}}))
}

// formedWithKeys is a formed 3 × 2 cluster holding keys in every seventh
// slot and 400 keys in slot 5000 (more than one bounded MIGRATE step).
func formedWithKeys(t *testing.T) (*redisCluster, Snapshot, int) {
	c := newRedisCluster(3, 2)
	_, s := c.run(t, c.snapshot())
	total := 0
	for _, n := range c.nodes {
		if !n.master {
			continue
		}
		n.keys = map[int]int{}
		eachSlot(n.slots, func(sl int) {
			if sl%7 == 0 {
				n.keys[sl] = 2
				total += 2
			}
			if sl == 5000 {
				n.keys[sl] += 400
				total += 400
			}
		})
	}
	return c, s, total
}

// checkLayout: each shard's master serves its even share and holds the
// keys of those slots only, no slot is marked moving, no key is lost.
func checkLayout(g Gomega, c *redisCluster, n, total int) {
	got := 0
	for i := range n {
		m := c.nodes[i*c.perShard]
		g.Expect(m.master).To(BeTrue(), "shard %d's first pod is its master", i)
		g.Expect(m.slots).To(Equal([]probe.SlotRange{EvenSlots(i, n)}), "shard %d", i)
		g.Expect(m.migrating).To(BeEmpty())
		g.Expect(m.importing).To(BeEmpty())
		for sl, k := range m.keys {
			if k > 0 {
				g.Expect(ownsSlot(m, sl)).To(BeTrue(), "shard %d holds keys of slot %d it does not serve", i, sl)
			}
			got += k
		}
		for r := 1; r < c.perShard; r++ {
			g.Expect(c.nodes[i*c.perShard+r].masterID).To(Equal(m.id), "shard %d's replica", i)
		}
	}
	g.Expect(got).To(Equal(total), "keys")
}

// 3 shards → 4 → 3, played out on the model: the new shard's pods are
// added and replicate its lead, slots move in bounded batches, each
// state planned afresh (as a restarted operator would), and the removed
// shard is emptied and forgotten everywhere before its pods go.
func TestReshardGrowThenShrink(t *testing.T) {
	g := NewWithT(t)
	c, s, total := formedWithKeys(t)

	c.shards = 4
	s.Spec.Replicas = 8
	steps, s := c.run(t, s)
	g.Expect(steps[len(steps)-1].Type).To(Equal(ActionNone), "%s", steps[len(steps)-1])
	// status.shards lists the new, empty shard, then the operation is
	// recorded with its plan before anything else.
	g.Expect(stepTypes(steps[:3])).To(Equal([]ActionType{ActionRecordShards, ActionStartOperation, ActionResizeShards}))
	g.Expect(steps[1].Operation.Resharding.SlotsToMove).To(Equal(int32(8193)))
	g.Expect(steps[2].Values.Replicas).To(Equal(int32(8)))
	g.Expect(s.Operation).To(BeNil())
	g.Expect(s.Approved.Replicas).To(Equal(int32(8)))
	checkLayout(g, c, 4, total)
	g.Expect(s.Sharded.Recorded).To(HaveLen(4))
	g.Expect(s.Sharded.Recorded[3]).To(HaveField("ApproximateKeys", Not(BeNil())))
	g.Expect(*s.Sharded.Recorded[3].ApproximateKeys).To(BeNumerically("~", keysOf(c.byName("c-6")), 100), "within 100 keys of what c-6 holds")
	s.Sharded.Recorded[3].ApproximateKeys = nil
	g.Expect(s.Sharded.Recorded[3]).To(Equal(cachev1alpha1.ShardStatus{Index: 3, Slots: []string{"12288-16383"}, Master: "c-6", Replicas: []string{"c-7"}}))
	counts := map[ActionType]int{}
	for _, a := range steps {
		counts[a.Type]++
		if a.Type == ActionSlotsMigrating {
			n := 0
			for _, r := range a.Slots {
				n += r.Len()
			}
			g.Expect(n).To(BeNumerically("<=", MigrateBatchSlots))
		}
	}
	g.Expect(counts[ActionSlotsAssign]).To(Equal(counts[ActionSlotsMigrating]))
	g.Expect(counts[ActionMigrateKeys]).To(BeNumerically(">", counts[ActionSlotsMigrating]), "slot 5000's keys take more than one step")

	c.shards = 3
	s.Spec.Replicas = 6
	steps, s = c.run(t, s)
	g.Expect(steps[len(steps)-1].Type).To(Equal(ActionNone), "%s", steps[len(steps)-1])
	g.Expect(c.nodes).To(HaveLen(6))
	g.Expect(s.Approved.Replicas).To(Equal(int32(6)))
	g.Expect(s.Operation).To(BeNil())
	checkLayout(g, c, 3, total)
	// The removed shard's slots moved first; it was forgotten on every
	// remaining node before the StatefulSet shrank.
	var first Action
	for _, a := range steps {
		if a.Type == ActionSlotsMigrating {
			first = a
			break
		}
	}
	g.Expect(first.Pod).To(Equal("c-6"))
	forgets := 0
	for _, a := range steps {
		if a.Type == ActionClusterForget {
			forgets++
			g.Expect(a.NodeIDs).To(ConsistOf(fmt.Sprintf("%040d", 7), fmt.Sprintf("%040d", 8)))
		}
	}
	g.Expect(forgets).To(Equal(6))
	g.Expect(steps[len(steps)-2].Type).To(Equal(ActionCompleteOperation))
}

// movingCluster is a formed 3 × 2 cluster being grown to 4 shards, its
// new shard's pods met and attached, the operation recorded.
func movingCluster(t *testing.T) (*redisCluster, Snapshot) {
	c, s, _ := formedWithKeys(t)
	c.shards = 4
	s.Spec.Replicas = 8
	for range 20 {
		fresh := c.snapshot()
		fresh.Sharded.Recorded, fresh.Approved, fresh.Spec, fresh.Operation = s.Sharded.Recorded, s.Approved, s.Spec, s.Operation
		a := Next(fresh)
		if a.Type == ActionSlotsMigrating {
			return c, fresh
		}
		c.apply(t, &fresh, a)
		s = fresh
	}
	t.Fatal("no slot move was planned")
	return nil, s
}

func TestReshardResumes(t *testing.T) {
	tests := []struct {
		name  string
		given func(c *redisCluster)
		want  Action
		alert bool
	}{
		{
			name: "a slot importing on the target only: the target is told its owner and both sides are marked again",
			given: func(c *redisCluster) {
				setMark(&c.nodes[2].importing, 5000, c.nodes[0].id)
			},
			want: Action{Type: ActionSlotsReimport, Pod: "c-0", Master: "c-2", Slots: []probe.SlotRange{rng(5000, 5000)}},
		},
		{
			name: "a slot migrating on the source only is marked on both sides again",
			given: func(c *redisCluster) {
				setMark(&c.nodes[0].migrating, 5000, c.nodes[2].id)
			},
			want: Action{Type: ActionSlotsMigrating, Pod: "c-0", Master: "c-2", Slots: []probe.SlotRange{rng(5000, 5000)}},
		},
		{
			name: "a slot marked on both sides whose source still holds keys moves keys",
			given: func(c *redisCluster) {
				setMark(&c.nodes[0].migrating, 5000, c.nodes[2].id)
				setMark(&c.nodes[2].importing, 5000, c.nodes[0].id)
			},
			want: Action{Type: ActionMigrateKeys, Pod: "c-0", Master: "c-2", Slots: []probe.SlotRange{rng(5000, 5000)}},
		},
		{
			name: "a slot marked on both sides whose source holds no key is given to the target on every master",
			given: func(c *redisCluster) {
				setMark(&c.nodes[0].migrating, 5001, c.nodes[2].id)
				setMark(&c.nodes[2].importing, 5001, c.nodes[0].id)
			},
			want: Action{Type: ActionSlotsAssign, Pod: "c-0", Master: "c-2", Slots: []probe.SlotRange{rng(5001, 5001)}},
		},
		{
			name: "a slot the target serves already while the source still marks it migrating: every master is told again",
			given: func(c *redisCluster) {
				setMark(&c.nodes[0].migrating, 5001, c.nodes[2].id)
				c.nodes[2].slots = withSlot(c.nodes[2].slots, 5001)
			},
			want: Action{Type: ActionSlotsAssign, Master: "c-2", Slots: []probe.SlotRange{rng(5001, 5001)}},
		},
		{
			name: "two shards serving a slot with no migration between them is left to a person",
			given: func(c *redisCluster) {
				c.nodes[4].slots = withSlot(c.nodes[4].slots, 10)
			},
			want:  Action{Type: ActionWait},
			alert: true,
		},
		{
			name: "a source that failed over mid-migration: the target imports from the replica that serves the slot now",
			given: func(c *redisCluster) {
				setMark(&c.nodes[2].importing, 5000, c.nodes[0].id)
				c.nodes[0].down = true
				c.nodes[1].master, c.nodes[1].masterID, c.nodes[1].slots, c.nodes[1].keys = true, "", c.nodes[0].slots, c.nodes[0].keys
				c.nodes[0].slots = nil
			},
			want: Action{Type: ActionSlotsReimport, Pod: "c-1", Master: "c-2", Slots: []probe.SlotRange{rng(5000, 5000)}},
		},
		{
			name: "the target does not answer: the move waits",
			given: func(c *redisCluster) {
				setMark(&c.nodes[0].migrating, 5000, c.nodes[2].id)
				setMark(&c.nodes[2].importing, 5000, c.nodes[0].id)
				c.nodes[2].down = true
			},
			want: Action{Type: ActionWait},
		},
		{
			name: "a new shard's pod that does not answer holds the first move back",
			given: func(c *redisCluster) {
				c.nodes[7].down = true
			},
			want: Action{Type: ActionWait, Pod: "c-7"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c, s := movingCluster(t)
			tt.given(c)
			var got Action
			for range 10 {
				fresh := c.snapshot()
				fresh.Sharded.Recorded, fresh.Approved, fresh.Spec, fresh.Operation = s.Sharded.Recorded, s.Approved, s.Spec, s.Operation
				// Labels and status.shards follow the nodes first.
				if got = Next(fresh); got.Type != ActionRecordShards && got.Type != ActionUnlabel && got.Type != ActionLabelMaster && got.Type != ActionLabelReplica {
					break
				}
				c.apply(t, &fresh, got)
				s = fresh
			}
			expectAction(g, got, tt.want)
			g.Expect(got.Alert != "").To(Equal(tt.alert), "%s", got)
		})
	}
}

// A shard-count change is resharding only: the version is the same, so
// no rolling restart follows once the slots moved.
func TestReshardIsNotARestart(t *testing.T) {
	g := NewWithT(t)
	c := newRedisCluster(3, 2)
	_, s := c.run(t, c.snapshot())
	c.shards = 4
	s.Spec.Replicas = 8
	steps, _ := c.run(t, s)
	for _, a := range steps {
		g.Expect(a.Type).NotTo(BeElementOf(ActionRestartPod, ActionPrecheckStart, ActionShardFailover), "%s", a)
		if a.Type == ActionStartOperation {
			g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationScaling), "%s", a)
		}
	}
	g.Expect(steps[len(steps)-1].Type).To(Equal(ActionNone))
}

// TargetShard computes in one step what EvenSlots lays out: for every
// allowed shard count, each slot's shard is the one whose even range
// holds it.
func TestTargetShardIsTheEvenLayout(t *testing.T) {
	for n := 3; n <= 64; n++ {
		for i := range n {
			r := EvenSlots(i, n)
			for s := r.Start; s <= r.End; s++ {
				if got := TargetShard(s, n); got != i {
					t.Fatalf("TargetShard(%d, %d) = %d, EvenSlots puts it in shard %d (%s)", s, n, got, i, r)
				}
			}
		}
	}
	for _, s := range []int{-1, 16384} {
		if got := TargetShard(s, 3); got != -1 {
			t.Errorf("TargetShard(%d, 3) = %d, want -1", s, got)
		}
	}
}
