package plan

import (
	"cmp"
	"fmt"
	"maps"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// redisCluster is a model of the nodes of a sharded cluster, just enough to
// give each pod the view CLUSTER INFO and CLUSTER NODES would, and to play
// the planner's steps out: a meet is known to every node at once (gossip
// is instant here), slots and replication are as the last step set them.
type redisCluster struct {
	shards, perShard int
	nodes            []*modelNode
	// The rollout's world (shard_rollout_test.go): the StatefulSet's
	// revision of each template it rendered, the pre-check pod, the data
	// checks and the switchover the operator remembers.
	revs       map[string]string
	precheck   *PrecheckState
	dataChecks map[string]DataCheck
	issuedAt   time.Time
}

type modelNode struct {
	id, ip   string
	met      bool // known to the introducer (and so, by gossip, to all)
	master   bool
	masterID string
	slots    []probe.SlotRange
	down     bool
	// silent: not probed yet (an operator just restarted): no view of
	// its own, while the others still list it as it is.
	silent bool
	label  string
	// rev is the StatefulSet revision of the pod; run counts its
	// server's starts (its run_id).
	rev string
	run int
	// params are the node's cluster parameters, as CONFIG GET reports
	// them.
	params map[string]string
	// saving: busy with a background save (INFO persistence).
	saving bool
	// Resharding: the slots marked on the node's own line, the keys it
	// holds by slot, the nodes it was told to forget.
	migrating, importing map[int]string
	keys                 map[int]int
	forgot               map[string]bool
}

func newRedisCluster(shards, perShard int) *redisCluster {
	c := &redisCluster{shards: shards, perShard: perShard}
	for o := range shards * perShard {
		c.nodes = append(c.nodes, &modelNode{id: fmt.Sprintf("%040d", o+1), ip: fmt.Sprintf("10.1.0.%d", o+1), master: true, met: o == 0})
	}
	return c
}

func (c *redisCluster) name(o int) string { return fmt.Sprintf("c-%d", o) }

func (c *redisCluster) byName(name string) *modelNode {
	for o, n := range c.nodes {
		if c.name(o) == name {
			return n
		}
	}
	return nil
}

func (c *redisCluster) line(n *modelNode) probe.ClusterNode {
	return probe.ClusterNode{ID: n.id, IP: n.ip, Master: n.master, MasterID: n.masterID, Failed: n.down, Slots: n.slots, Moving: len(n.migrating) + len(n.importing)}
}

// view is what node n would answer.
func (c *redisCluster) view(n *modelNode) *probe.ClusterView {
	v := &probe.ClusterView{Myself: c.line(n), Parameters: maps.Clone(n.params)}
	if len(n.migrating) > 0 {
		v.Myself.Migrating, v.MigratingKeys = map[int]string{}, map[int]int{}
		for s, id := range n.migrating {
			v.Myself.Migrating[s], v.MigratingKeys[s] = id, n.keys[s]
		}
	}
	if len(n.importing) > 0 {
		v.Myself.Importing = maps.Clone(n.importing)
	}
	var served slotSet
	failed := false
	for _, m := range c.nodes {
		if m != n && (!m.met || !n.met || n.forgot[m.id]) {
			continue
		}
		v.Nodes = append(v.Nodes, c.line(m))
		served.add(m.slots...)
		failed = failed || (m.down && len(m.slots) > 0)
	}
	v.KnownNodes = len(v.Nodes)
	for i := range cachev1alpha1.SlotCount {
		if served.has(i) {
			v.SlotsAssigned++
		}
	}
	v.State = "fail"
	if v.SlotsAssigned == cachev1alpha1.SlotCount && !failed {
		v.State = "ok"
	}
	return v
}

func (c *redisCluster) snapshot() Snapshot {
	spec := cachev1alpha1.RolloutValues{Replicas: int32(c.shards * c.perShard), Version: "7.0.15"}
	s := Snapshot{Name: "c", Now: now, Sharded: &ShardedState{Shards: c.shards, PodsPerShard: c.perShard}, Spec: spec}
	c.workload(&s)
	for o, n := range c.nodes {
		p := pod(c.name(o), n.ip, "master", "", n.label, 0, 0)
		if n.masterID != "" {
			for _, m := range c.nodes {
				if m.id == n.masterID {
					p.Obs.Role, p.Obs.MasterHost, p.Obs.MasterLinkUp = "slave", m.ip, true
				}
			}
		}
		p.Ready, p.Obs.Saving, p.Revision, p.Obs.RunID = !n.down, n.saving, cmp.Or(n.rev, "r1"), fmt.Sprintf("%s@%d", c.name(o), n.run)
		for _, k := range n.keys {
			p.Obs.Keys += int64(k)
		}
		// A replica reports its master's address and holds its keys.
		for _, m := range c.nodes {
			if !n.master && m.id == n.masterID {
				p.Obs.Role, p.Obs.MasterHost, p.Obs.MasterLinkUp = "slave", m.ip, !m.down
				for _, k := range m.keys {
					p.Obs.Keys += int64(k)
				}
			}
		}
		switch {
		case n.silent:
			p = PodState{Name: p.Name, IP: p.IP, RoleLabel: p.RoleLabel, Revision: p.Revision}
		case n.down:
			p = down(p, 0)
		default:
			p.Obs.Cluster = c.view(n)
		}
		s.Pods = append(s.Pods, p)
	}
	return s
}

// apply plays a step out as Redis (and the status writer) would.
func (c *redisCluster) apply(t testing.TB, s *Snapshot, a Action) {
	t.Helper()
	switch a.Type {
	case ActionClusterMeet:
		c.byName(a.Master).met = true
	case ActionClusterAddSlots:
		n := c.byName(a.Pod)
		n.slots = append(n.slots, a.Slots...)
	case ActionClusterReplicate:
		n := c.byName(a.Pod)
		if len(n.slots) > 0 {
			t.Fatalf("%s: CLUSTER REPLICATE on a node that serves slots", a)
		}
		n.master, n.masterID = false, c.byName(a.Master).id
	case ActionLabelMaster:
		c.byName(a.Pod).label = cachev1alpha1.RoleMaster
	case ActionLabelReplica:
		c.byName(a.Pod).label = cachev1alpha1.RoleReplica
	case ActionUnlabel:
		c.byName(a.Pod).label = ""
	case ActionRecordShards:
		s.Sharded.Recorded = a.Shards
	case ActionApprove:
		s.Approved = a.Values
	case ActionRunShardedBackup:
		b := *s.Backup
		b.Phase, b.Running = cachev1alpha1.BackupRunning, true
		s.Backup = &b
	case ActionVerifyRestore:
		s.RestorePending, s.Sharded.Restore = false, nil
	default:
		if !c.applyRollout(t, s, a) {
			c.applyReshard(t, s, a)
		}
	}
}

// applyReshard plays a resharding step out as Redis would.
func (c *redisCluster) applyReshard(t testing.TB, s *Snapshot, a Action) {
	t.Helper()
	switch a.Type {
	case ActionStartOperation:
		op := a.Operation.DeepCopy()
		op.ID = "op1"
		s.Operation = op
	case ActionNextStep:
		s.Operation = a.Operation
	case ActionCompleteOperation:
		s.Operation = nil
	case ActionResizeShards:
		s.Approved = a.Values
		want := int(a.Values.Replicas)
		for o := len(c.nodes); o < want; o++ {
			// A new pod is made from the StatefulSet's current template.
			c.nodes = append(c.nodes, &modelNode{id: fmt.Sprintf("%040d", o+1), ip: fmt.Sprintf("10.1.0.%d", o+1), master: true, rev: s.StatefulSet.UpdateRevision})
		}
		for _, n := range c.nodes[min(want, len(c.nodes)):] {
			for _, m := range c.nodes[:want] {
				if n.met && !m.forgot[n.id] {
					t.Fatalf("%s: %s is removed while %s knows it", a, n.id, m.id)
				}
			}
			if len(n.slots) > 0 {
				t.Fatalf("%s: a removed node serves slots %v", a, n.slots)
			}
		}
		c.nodes = c.nodes[:min(want, len(c.nodes))]
	case ActionSlotsMigrating:
		src, tgt := c.byName(a.Pod), c.byName(a.Master)
		eachSlot(a.Slots, func(sl int) {
			if !ownsSlot(tgt, sl) {
				setMark(&tgt.importing, sl, src.id)
			}
			if !ownsSlot(src, sl) {
				t.Fatalf("%s: MIGRATING on a node that does not own slot %d", a, sl)
			}
			setMark(&src.migrating, sl, tgt.id)
		})
	case ActionMigrateKeys:
		src, tgt := c.byName(a.Pod), c.byName(a.Master)
		budget := 150 // a bounded step: more than one is needed
		eachSlot(a.Slots, func(sl int) {
			if src.migrating[sl] != tgt.id || tgt.importing[sl] != src.id {
				t.Fatalf("%s: MIGRATE of slot %d that is not marked on both sides", a, sl)
			}
			k := min(src.keys[sl], budget)
			budget -= k
			src.keys[sl] -= k
			if tgt.keys == nil {
				tgt.keys = map[int]int{}
			}
			tgt.keys[sl] += k
		})
	case ActionSlotsAssign:
		tgt := c.byName(a.Master)
		eachSlot(a.Slots, func(sl int) {
			for _, n := range c.nodes {
				if n != tgt && ownsSlot(n, sl) && n.keys[sl] > 0 {
					t.Fatalf("%s: slot %d given away while %s holds %d keys of it", a, sl, n.id, n.keys[sl])
				}
				if ownsSlot(n, sl) {
					n.slots = withoutSlot(n.slots, sl)
				}
				delete(n.migrating, sl)
			}
			delete(tgt.importing, sl)
			tgt.slots = withSlot(tgt.slots, sl)
		})
	case ActionSlotsReimport:
		src, tgt := c.byName(a.Pod), c.byName(a.Master)
		eachSlot(a.Slots, func(sl int) {
			setMark(&tgt.importing, sl, src.id)
			setMark(&src.migrating, sl, tgt.id)
		})
	case ActionClusterReset:
		n := c.byName(a.Pod)
		if n.master && len(n.keys) > 0 {
			for _, k := range n.keys {
				if k > 0 {
					t.Fatalf("%s: CLUSTER RESET on a master that holds keys", a)
				}
			}
		}
		n.id, n.met, n.master, n.masterID, n.forgot = fmt.Sprintf("%040d", 1000+len(n.id)), false, true, "", nil
	case ActionClusterForget:
		n := c.byName(a.Pod)
		if n.forgot == nil {
			n.forgot = map[string]bool{}
		}
		for _, id := range a.NodeIDs {
			n.forgot[id] = true
		}
	default:
		t.Fatalf("unexpected step %s", a)
	}
}

// run plans and plays steps until the planner has nothing to do, and
// returns the steps; at every intermediate state it also plans afresh, as
// an operator restarted there would, and must choose the same step.
func (c *redisCluster) run(t testing.TB, s Snapshot) ([]Action, Snapshot) {
	t.Helper()
	var steps []Action
	for range 3000 {
		fresh := c.next(s)
		fresh.RestorePending, fresh.Sharded.Restore, fresh.Backup, fresh.PendingBackup = s.RestorePending, s.Sharded.Restore, s.Backup, s.PendingBackup
		a := Next(fresh)
		if a.Type == ActionNone || a.Type == ActionWait {
			return append(steps, a), fresh
		}
		steps = append(steps, a)
		c.apply(t, &fresh, a)
		s = fresh
	}
	t.Fatal("the planner did not settle in 3000 steps")
	return nil, s
}

func stepTypes(steps []Action) []ActionType {
	out := make([]ActionType, 0, len(steps))
	for _, a := range steps {
		out = append(out, a.Type)
	}
	return out
}

// A fresh cluster of 3 shards × 2 pods is formed in the order the nodes
// need: meet, slots, replicas, labels, status; then spec is approved.
func TestShardedBootstrap(t *testing.T) {
	g := NewWithT(t)
	c := newRedisCluster(3, 2)
	steps, end := c.run(t, c.snapshot())
	g.Expect(stepTypes(steps)).To(Equal([]ActionType{
		ActionClusterMeet, ActionClusterMeet, ActionClusterMeet, ActionClusterMeet, ActionClusterMeet,
		ActionClusterAddSlots, ActionClusterAddSlots, ActionClusterAddSlots,
		ActionClusterReplicate, ActionClusterReplicate, ActionClusterReplicate,
		ActionLabelMaster, ActionLabelReplica, ActionLabelMaster, ActionLabelReplica, ActionLabelMaster, ActionLabelReplica,
		ActionRecordShards, ActionApprove, ActionNone,
	}))
	g.Expect(steps[5]).To(HaveField("Pod", "c-0"))
	g.Expect(steps[5].Slots).To(Equal([]probe.SlotRange{rng(0, 5461)}))
	g.Expect(steps[7]).To(HaveField("Pod", "c-4"))
	g.Expect(steps[8]).To(And(HaveField("Pod", "c-1"), HaveField("Master", "c-0")))
	g.Expect(end.Sharded.Recorded).To(Equal([]cachev1alpha1.ShardStatus{
		{Index: 0, Slots: []string{"0-5461"}, Master: "c-0", Replicas: []string{"c-1"}, ApproximateKeys: ptr.To[int64](0)},
		{Index: 1, Slots: []string{"5462-10922"}, Master: "c-2", Replicas: []string{"c-3"}, ApproximateKeys: ptr.To[int64](0)},
		{Index: 2, Slots: []string{"10923-16383"}, Master: "c-4", Replicas: []string{"c-5"}, ApproximateKeys: ptr.To[int64](0)},
	}))
	g.Expect(ShardedHealth(end)).To(BeEmpty())
}

func TestShardedPlan(t *testing.T) {
	formed := func() *redisCluster {
		c := newRedisCluster(3, 2)
		c.run(t, c.snapshot())
		return c
	}
	tests := []struct {
		name  string
		given func() *redisCluster
		want  Action
		// wantHealth is a part of ShardedHealth's answer; "" for none.
		wantHealth string
	}{
		{
			name: "bootstrap waits for every pod of the layout",
			given: func() *redisCluster {
				c := newRedisCluster(3, 2)
				c.nodes[5].down = true
				return c
			},
			want:       Action{Type: ActionWait, Pod: "c-5"},
			wantHealth: "cluster_state:fail with 0 of 16384 slots served",
		},
		{
			name: "an operator restarted after part of a shard's slots were given gives the rest",
			given: func() *redisCluster {
				c := newRedisCluster(3, 2)
				for _, n := range c.nodes {
					n.met = true
				}
				c.nodes[0].slots = []probe.SlotRange{rng(0, 5461)}
				c.nodes[2].slots = []probe.SlotRange{rng(5462, 8000)}
				return c
			},
			want:       Action{Type: ActionClusterAddSlots, Pod: "c-2", Slots: []probe.SlotRange{rng(8001, 10922)}},
			wantHealth: "with 8001 of 16384 slots served",
		},
		{
			name: "a shard whose replica was already attached gives the slots to the master",
			given: func() *redisCluster {
				c := newRedisCluster(3, 2)
				for _, n := range c.nodes {
					n.met = true
				}
				c.nodes[1].master, c.nodes[1].masterID = false, c.nodes[0].id
				return c
			},
			want: Action{Type: ActionClusterAddSlots, Pod: "c-0", Slots: []probe.SlotRange{rng(0, 5461)}},
		},
		{
			name: "two nodes of a shard serving slots is left to a person",
			given: func() *redisCluster {
				c := newRedisCluster(3, 2)
				for _, n := range c.nodes {
					n.met = true
				}
				for i := range 3 {
					c.nodes[2*i].slots = []probe.SlotRange{EvenSlots(i, 3)}
				}
				c.nodes[1].slots = []probe.SlotRange{rng(0, 0)}
				c.nodes[0].slots = []probe.SlotRange{rng(1, 5461)}
				return c
			},
			want: Action{Type: ActionWait, Pod: "c-1"},
		},
		{
			name: "a formed cluster whose master died waits for its shard's election",
			given: func() *redisCluster {
				c := formed()
				c.nodes[2].down = true
				return c
			},
			want:       Action{Type: ActionWait},
			wantHealth: "cluster_state:fail with 16384 of 16384 slots served",
		},
		{
			name: "after the election the dead master's label goes first, then the new master is labelled",
			given: func() *redisCluster {
				c := formed()
				c.nodes[2].down = true
				c.nodes[3].master, c.nodes[3].masterID, c.nodes[3].slots = true, "", c.nodes[2].slots
				c.nodes[2].slots = nil
				return c
			},
			want: Action{Type: ActionUnlabel, Pod: "c-2"},
		},
		{
			name: "the old master back as a replica of the new one is labelled replica",
			given: func() *redisCluster {
				c := formed()
				c.nodes[3].master, c.nodes[3].masterID, c.nodes[3].slots = true, "", c.nodes[2].slots
				c.nodes[3].label = cachev1alpha1.RoleMaster
				c.nodes[2].master, c.nodes[2].masterID, c.nodes[2].slots, c.nodes[2].label = false, c.nodes[3].id, nil, ""
				return c
			},
			want: Action{Type: ActionLabelReplica, Pod: "c-2"},
		},
		{
			name: "a recreated pod with a new node is met and made a replica of its shard's master",
			given: func() *redisCluster {
				c := formed()
				c.nodes[5] = &modelNode{id: fmt.Sprintf("%040d", 99), ip: "10.1.0.99", master: true}
				return c
			},
			want: Action{Type: ActionClusterMeet, Pod: "c-0", Master: "c-5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := tt.given()
			s := c.snapshot()
			got := Next(s)
			expectAction(g, got, tt.want)
			if tt.wantHealth == "" {
				return
			}
			g.Expect(ShardedHealth(s)).To(ContainSubstring(tt.wantHealth))
		})
	}
}

// TestAShardWhoseMasterHasNotAnsweredGetsNoEmptyLead: after an operator
// restart a shard's master has not been probed yet (each pod is probed on
// its own clock), its replica has answered, and the shard's third pod came
// back empty on a new volume. The empty node is not taken for a new
// shard's lead (its replica would resynchronise from it and drop its
// copy), and the silent master keeps its label; once the master answers,
// both follow it.
func TestAShardWhoseMasterHasNotAnsweredGetsNoEmptyLead(t *testing.T) {
	g := NewWithT(t)
	c := newRedisCluster(3, 3)
	_, s := c.run(t, c.snapshot())
	c.nodes[0].silent = true
	c.nodes[2] = &modelNode{id: fmt.Sprintf("%040d", 99), ip: "10.1.0.99", master: true, met: true}
	steps, s := c.run(t, s)
	for _, a := range steps {
		g.Expect(a.Type == ActionClusterReplicate && a.Master == "c-2").To(BeFalse(), "%v", steps)
		g.Expect(a.Type == ActionUnlabel && a.Pod == "c-0").To(BeFalse(), "%v", steps)
	}
	g.Expect(s.Sharded.Recorded[0].Master).To(Equal("c-0"), "the status names the master by its peers' word")

	c.nodes[0].silent = false
	c.run(t, s)
	g.Expect(c.nodes[1].masterID).To(Equal(c.nodes[0].id))
	g.Expect(c.nodes[2].masterID).To(Equal(c.nodes[0].id))
	g.Expect(c.nodes[0].label).To(Equal(cachev1alpha1.RoleMaster))
}

// After a failover every step the planner takes leads to a settled
// cluster whose status names the new master.
func TestShardedAfterFailoverSettles(t *testing.T) {
	g := NewWithT(t)
	c := newRedisCluster(3, 2)
	_, s := c.run(t, c.snapshot())
	c.nodes[3].master, c.nodes[3].masterID, c.nodes[3].slots = true, "", c.nodes[2].slots
	c.nodes[2].master, c.nodes[2].masterID, c.nodes[2].slots = false, c.nodes[3].id, nil
	steps, end := c.run(t, s)
	g.Expect(stepTypes(steps)).To(Equal([]ActionType{ActionUnlabel, ActionLabelReplica, ActionLabelMaster, ActionRecordShards, ActionNone}))
	g.Expect(end.Sharded.Recorded[1]).To(Equal(cachev1alpha1.ShardStatus{Index: 1, Slots: []string{"5462-10922"}, Master: "c-3", Replicas: []string{"c-2"}, ApproximateKeys: ptr.To[int64](0)}))
}

func eachSlot(rs []probe.SlotRange, f func(int)) {
	for _, r := range rs {
		for sl := r.Start; sl <= r.End; sl++ {
			f(sl)
		}
	}
}

func setMark(m *map[int]string, slot int, id string) {
	if *m == nil {
		*m = map[int]string{}
	}
	(*m)[slot] = id
}

func ownsSlot(n *modelNode, slot int) bool {
	for _, r := range n.slots {
		if slot >= r.Start && slot <= r.End {
			return true
		}
	}
	return false
}

func slotRanges(set *slotSet) []probe.SlotRange {
	var all slotSet
	for i := range cachev1alpha1.SlotCount {
		if !set.has(i) {
			all.add(probe.SlotRange{Start: i, End: i})
		}
	}
	return all.missing(probe.SlotRange{Start: 0, End: cachev1alpha1.SlotCount - 1})
}

func withSlot(rs []probe.SlotRange, slot int) []probe.SlotRange {
	var s slotSet
	s.add(rs...)
	s.add(probe.SlotRange{Start: slot, End: slot})
	return slotRanges(&s)
}

func withoutSlot(rs []probe.SlotRange, slot int) []probe.SlotRange {
	var s slotSet
	s.add(rs...)
	s[slot/64] &^= 1 << (slot % 64)
	return slotRanges(&s)
}

// expectAction: got is want's type, and its pod, master and slots where
// want names them.
func expectAction(g Gomega, got, want Action) {
	g.Expect(got.Type).To(Equal(want.Type), "%s", got)
	if want.Pod != "" {
		g.Expect(got.Pod).To(Equal(want.Pod), "%s", got)
	}
	if want.Master != "" {
		g.Expect(got.Master).To(Equal(want.Master), "%s", got)
	}
	if want.Slots != nil {
		g.Expect(got.Slots).To(Equal(want.Slots), "%s", got)
	}
}
