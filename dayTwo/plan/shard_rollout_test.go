package plan

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

// workload is what day-one and the StatefulSet controller make of the
// approved values (spec before the first approval): the StatefulSet's
// template and its revision, the same revision for a template it rendered
// before (as a ControllerRevision is found again by its hash); the
// pre-check pod, the data checks and the switchover issued, as the
// operator remembers them.
func (c *redisCluster) workload(s *Snapshot) {
	v := s.Spec
	if s.Approved != nil {
		v = *s.Approved
	}
	key := renderer.TemplateKey(v)
	if c.revs == nil {
		c.revs = map[string]string{renderer.TemplateKey(s.Spec): "r1"}
	}
	if _, ok := c.revs[key]; !ok {
		c.revs[key] = fmt.Sprintf("r%d", len(c.revs)+1)
	}
	s.StatefulSet = &StatefulSetState{Settled: true, TemplateKey: key, Replicas: v.Replicas, UpdateRevision: c.revs[key]}
	s.Precheck, s.DataChecks, s.SwitchoverIssuedAt = c.precheck, c.dataChecks, c.issuedAt
}

// modelStep is the time a step takes in the model: more than
// SwitchoverSettle, so no step waits for the clock.
const modelStep = 3 * time.Second

// next is the snapshot a fresh plan sees after s: the nodes and the
// workload as they are now, the status and spec as s left them, a step
// later.
func (c *redisCluster) next(s Snapshot) Snapshot {
	fresh := c.snapshot()
	fresh.Sharded.Recorded, fresh.Sharded.Parameters = s.Sharded.Recorded, s.Sharded.Parameters
	fresh.Approved, fresh.Spec, fresh.Operation, fresh.Blocked = s.Approved, s.Spec, s.Operation, s.Blocked
	fresh.Now, fresh.StepDeadline = s.Now.Add(modelStep), s.StepDeadline
	c.workload(&fresh)
	return fresh
}

// applyRollout plays a step of a rolling restart out as the pods, Redis
// and the status writer would; false when a is not such a step.
func (c *redisCluster) applyRollout(t testing.TB, s *Snapshot, a Action) bool {
	t.Helper()
	switch a.Type {
	case ActionPrecheckStart:
		keys := int64(0)
		if a.Pod != "" {
			p, _ := s.Pod(a.Pod)
			keys = p.Obs.Keys
		}
		c.precheck = &PrecheckState{TemplateKey: renderer.TemplateKey(*a.Values), Ready: true,
			Seed: &SeedState{Source: a.Pod, Keys: keys, Loaded: keys}}
	case ActionPrecheckPass:
		c.precheck = nil
		s.Approved, s.Operation = a.Values, a.Operation
	case ActionPrecheckFail:
		c.precheck, s.Operation = nil, nil
	case ActionRefuseChange:
		s.Blocked = &cachev1alpha1.RolloutBlock{Target: renderer.ValuesKey(*a.Values), Reason: cachev1alpha1.ReasonDowngradeRefused}
	case ActionRestartPod:
		n := c.byName(a.Pod)
		if n.master && len(n.slots) > 0 && c.perShard > 1 {
			t.Fatalf("%s: a master that serves slots is restarted while its shard has a replica", a)
		}
		n.rev, n.run = s.StatefulSet.UpdateRevision, n.run+1
	case ActionCheckData:
		p, _ := s.Pod(a.Pod)
		if c.dataChecks == nil {
			c.dataChecks = map[string]DataCheck{}
		}
		c.dataChecks[a.Pod] = DataCheck{RunID: p.Obs.RunID, Master: a.Master, Sampled: 32, At: s.Now}
	case ActionShardFailover:
		to, from := c.byName(a.Pod), c.byName(a.Master)
		if to.master || to.masterID != from.id || len(from.slots) == 0 {
			t.Fatalf("%s: CLUSTER FAILOVER on a node that is no replica of a master serving slots", a)
		}
		// The replica takes the slots; the old master and the shard's
		// other replicas follow it (Redis moves them).
		for _, n := range c.nodes {
			if n.masterID == from.id {
				n.masterID = to.id
			}
		}
		to.master, to.masterID, to.slots, to.keys = true, "", from.slots, from.keys
		from.master, from.masterID, from.slots = false, to.id, nil
	case ActionEndShardSwitchover:
		s.Operation = a.Operation
		if a.Values != nil {
			s.Approved = a.Values
		}
		c.issuedAt = time.Time{}
	case ActionRollback:
		s.Approved, s.Operation = a.Values, a.Operation
	case ActionApplyConfig:
		for _, n := range c.nodes {
			for k, v := range a.Config {
				if _, ok := n.params[k]; ok {
					n.params[k] = v
				}
			}
		}
		s.Approved, s.Operation = a.Values, nil
	case ActionCompleteOperation:
		if a.Values != nil {
			s.Approved = a.Values
		}
		if op := s.Operation; a.Operation != nil && a.Operation.Reason != "" && op.Target != nil {
			// A rolled-back upgrade blocks its target until spec changes.
			s.Blocked = &cachev1alpha1.RolloutBlock{Target: renderer.ValuesKey(*op.Target), Reason: cachev1alpha1.ReasonUpgradeRolledBack}
		}
		s.Operation = nil
	default:
		return false
	}
	return true
}

// formedSharded is a formed 3 × 2 cluster holding keys (shard 1's the
// most), its spec approved.
func formedSharded(t *testing.T) (*redisCluster, Snapshot) {
	c := newRedisCluster(3, 2)
	_, s := c.run(t, c.snapshot())
	for i, n := range c.nodes {
		n.keys = map[int]int{0: 10 + i}
	}
	return c, s
}

func restartsOf(steps []Action) []string {
	var out []string
	for _, a := range steps {
		if a.Type == ActionRestartPod {
			out = append(out, a.Pod)
		}
	}
	return out
}

// Redis 7.0.15 → Valkey 8.0.1 on 3 shards × 2 pods: the pre-check copies
// the in-sync replica holding the most keys; every shard's replica
// restarts first, from the highest ordinal, and is checked against its
// own shard's master; then each shard in turn hands its slots to its
// upgraded replica (CLUSTER FAILOVER on it) and its old master restarts
// and is checked against the new one.
func TestShardedRollingUpgrade(t *testing.T) {
	g := NewWithT(t)
	c, s := formedSharded(t)
	s.Spec.Engine, s.Spec.Version = cachev1alpha1.EngineValkey, "8.0.1"
	steps, end := c.run(t, s)
	g.Expect(steps[len(steps)-1].Type).To(Equal(ActionNone), "%s", steps[len(steps)-1])
	g.Expect(steps[0].Type).To(Equal(ActionStartOperation))
	g.Expect(steps[0].Operation.Type).To(Equal(cachev1alpha1.OperationUpgrade))
	g.Expect(steps[0].Reason).To(ContainSubstring("no rollback after the switchover"))
	expectAction(g, steps[1], Action{Type: ActionPrecheckStart, Pod: "c-5"})
	g.Expect(steps[2].Type).To(Equal(ActionPrecheckPass))
	g.Expect(restartsOf(steps)).To(Equal([]string{"c-5", "c-3", "c-1", "c-0", "c-2", "c-4"}))

	var order []string
	for _, a := range steps {
		switch a.Type {
		case ActionRestartPod:
			order = append(order, "restart "+a.Pod)
		case ActionCheckData:
			order = append(order, "check "+a.Pod+" on "+a.Master)
		case ActionShardFailover:
			order = append(order, "failover "+a.Master+"→"+a.Pod)
		case ActionEndShardSwitchover:
			order = append(order, "switched "+a.Pod)
		}
	}
	g.Expect(order).To(Equal([]string{
		"restart c-5", "check c-5 on c-4", "restart c-3", "check c-3 on c-2", "restart c-1", "check c-1 on c-0",
		"failover c-0→c-1", "switched c-1", "restart c-0", "check c-0 on c-1",
		"failover c-2→c-3", "switched c-3", "restart c-2", "check c-2 on c-3",
		"failover c-4→c-5", "switched c-5", "restart c-4", "check c-4 on c-5",
	}))
	g.Expect(end.Operation).To(BeNil())
	g.Expect(end.Approved.Engine).To(Equal(cachev1alpha1.EngineValkey))
	for o, n := range c.nodes {
		g.Expect(n.rev).To(Equal("r2"), "c-%d runs the new template", o)
		g.Expect(n.run).To(Equal(1), "c-%d restarted once", o)
	}
	// The layout only: the key counts are recorded too (approximateKeys).
	recorded := slices.Clone(end.Sharded.Recorded)
	for i := range recorded {
		recorded[i].ApproximateKeys = nil
	}
	g.Expect(recorded).To(Equal([]cachev1alpha1.ShardStatus{
		{Index: 0, Slots: []string{"0-5461"}, Master: "c-1", Replicas: []string{"c-0"}},
		{Index: 1, Slots: []string{"5462-10922"}, Master: "c-3", Replicas: []string{"c-2"}},
		{Index: 2, Slots: []string{"10923-16383"}, Master: "c-5", Replicas: []string{"c-4"}},
	}))
	// Each switchover's labels and status.shards follow the nodes before
	// the switchover is recorded as done.
	for i, a := range steps {
		if a.Type == ActionEndShardSwitchover {
			g.Expect(stepTypes(steps[i-4:i])).To(ConsistOf(ActionUnlabel, ActionLabelMaster, ActionLabelReplica, ActionRecordShards), "before %s", a)
		}
	}
	// The same change, run again, does nothing.
	again, _ := c.run(t, end)
	g.Expect(stepTypes(again)).To(Equal([]ActionType{ActionNone}))
}

// The operator may stop after any step of the rollout: what it kept in
// memory (the data checks, when it issued CLUSTER FAILOVER) is lost, the
// rest is read from the nodes and the status. Stopped at each step in
// turn, the rollout still restarts every pod once, in the same order.
func TestShardedRollingUpgradeResumesAfterAnyStep(t *testing.T) {
	g := NewWithT(t)
	c, s := formedSharded(t)
	toValkey(&s.Spec)
	want, _ := c.run(t, s)
	total := len(want)
	for stop := 1; stop < total-1; stop++ {
		t.Run(fmt.Sprintf("stopped after step %d (%s)", stop, want[stop-1].Type), func(t *testing.T) {
			g := NewWithT(t)
			c, s := formedSharded(t)
			toValkey(&s.Spec)
			var done []Action
			for range stop {
				fresh := c.next(s)
				a := Next(fresh)
				done = append(done, a)
				c.apply(t, &fresh, a)
				s = fresh
			}
			// The operator restarts: its memory is gone.
			c.dataChecks, c.issuedAt = nil, time.Time{}
			rest, end := c.run(t, s)
			g.Expect(rest[len(rest)-1].Type).To(Equal(ActionNone), "%s", rest[len(rest)-1])
			g.Expect(restartsOf(append(done, rest...))).To(Equal(restartsOf(want)))
			g.Expect(end.Operation).To(BeNil())
			for o, n := range c.nodes {
				g.Expect(n.run).To(Equal(1), "c-%d restarted once", o)
			}
		})
	}
	g.Expect(total).To(BeNumerically(">", 30))
}

// rolloutAt plays a resources change on a formed cluster until the step
// stop says to stop at, and returns the cluster and the snapshot a fresh
// plan would see there.
func rolloutAt(t *testing.T, change func(*cachev1alpha1.RolloutValues), stop func(Action) bool) (*redisCluster, Snapshot) {
	t.Helper()
	c, s := formedSharded(t)
	change(&s.Spec)
	for range 200 {
		fresh := c.next(s)
		a := Next(fresh)
		if stop(a) {
			return c, fresh
		}
		if a.Type == ActionNone || a.Type == ActionWait {
			t.Fatalf("the rollout ended before the state asked for: %s", a)
		}
		c.apply(t, &fresh, a)
		s = fresh
	}
	t.Fatal("the state asked for never came")
	return nil, Snapshot{}
}

func moreMemory(v *cachev1alpha1.RolloutValues) {
	v.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
}

func toValkey(v *cachev1alpha1.RolloutValues) {
	v.Engine, v.Version = cachev1alpha1.EngineValkey, "8.0.1"
}

// at stops before the nth step of type typ about pod (any pod when "").
func at(typ ActionType, pod string) func(Action) bool {
	return func(a Action) bool { return a.Type == typ && (pod == "" || a.Pod == pod) }
}

// Every intermediate state of a sharded rollout, planned afresh.
func TestShardedRolloutStates(t *testing.T) {
	expired := func(s *Snapshot) {
		s.StepDeadline = time.Minute
		op := s.Operation.DeepCopy()
		op.StepStartedAt = &metav1.Time{Time: s.Now.Add(-2 * time.Minute)}
		s.Operation = op
	}
	tests := []struct {
		name   string
		change func(*cachev1alpha1.RolloutValues)
		stop   func(Action) bool
		// given changes the cluster or the snapshot at the stop.
		given func(c *redisCluster, s *Snapshot)
		want  Action
		// reason is a part of the decision's Reason.
		reason string
	}{
		{
			name: "the pre-check copies the in-sync replica holding the most keys", change: moreMemory, stop: at(ActionPrecheckStart, ""),
			given: func(c *redisCluster, s *Snapshot) {},
			want:  Action{Type: ActionPrecheckStart, Pod: "c-5"},
		},
		{
			name: "a shard's master when no replica is in sync", change: moreMemory, stop: at(ActionPrecheckStart, ""),
			given: func(c *redisCluster, s *Snapshot) {
				for i := range s.Pods {
					s.Pods[i].Obs.MasterLinkUp = false
				}
			},
			want: Action{Type: ActionPrecheckStart, Pod: "c-4"},
		},
		{
			name: "a restarted replica not in sync yet is waited for", change: moreMemory, stop: at(ActionCheckData, "c-5"),
			given: func(c *redisCluster, s *Snapshot) { s.Pods[5].Obs.MasterLinkUp = false },
			want:  Action{Type: ActionWait, Pod: "c-5"}, reason: "not ready and in sync with shard 2's master c-4",
		},
		{
			name: "a restarted replica that follows another shard's master is made its own shard's replica again", change: moreMemory, stop: at(ActionCheckData, "c-5"),
			given: func(c *redisCluster, s *Snapshot) { s.Pods[5].Obs.Cluster.Myself.MasterID = c.nodes[2].id },
			want:  Action{Type: ActionClusterReplicate, Pod: "c-5", Master: "c-4"},
		},
		{
			name: "a restarted replica in sync is checked against its shard's master", change: moreMemory, stop: at(ActionCheckData, "c-5"),
			given: func(c *redisCluster, s *Snapshot) {},
			want:  Action{Type: ActionCheckData, Pod: "c-5", Master: "c-4"},
		},
		{
			name: "a replica missing keys stops the rollout", change: moreMemory, stop: at(ActionRestartPod, "c-3"),
			given: func(c *redisCluster, s *Snapshot) {
				dc := s.DataChecks["c-5"]
				dc.Missing = []string{"k1"}
				s.DataChecks = map[string]DataCheck{"c-5": dc}
			},
			want: Action{Type: ActionWait, Pod: "c-5"}, reason: "lacks 1 of the 32 keys",
		},
		{
			name: "a pod not back within the deadline before any switchover rolls back", change: toValkey, stop: at(ActionCheckData, "c-3"),
			given: func(c *redisCluster, s *Snapshot) {
				s.Pods[3].Ready = false
				expired(s)
			},
			want: Action{Type: ActionRollback, Pod: "c-3"},
		},
		{
			name: "after the replicas, shard 0's switchover to its upgraded replica", change: toValkey, stop: at(ActionNextStep, ""),
			given: func(c *redisCluster, s *Snapshot) {},
			want:  Action{Type: ActionNextStep, Pod: "c-1", Master: "c-0"}, reason: "shard 0: switchover",
		},
		{
			name: "CLUSTER FAILOVER on the replica", change: toValkey, stop: at(ActionShardFailover, ""),
			given: func(c *redisCluster, s *Snapshot) {},
			want:  Action{Type: ActionShardFailover, Pod: "c-1", Master: "c-0"},
		},
		{
			name: "a target whose link is down is waited for", change: toValkey, stop: at(ActionShardFailover, ""),
			given: func(c *redisCluster, s *Snapshot) { s.Pods[1].Obs.MasterLinkUp = false },
			want:  Action{Type: ActionWait, Pod: "c-1"}, reason: "waiting for the target to follow the master",
		},
		{
			name: "CLUSTER FAILOVER in progress", change: toValkey, stop: at(ActionShardFailover, ""),
			given: func(c *redisCluster, s *Snapshot) { s.SwitchoverIssuedAt = s.Now.Add(-time.Second) },
			want:  Action{Type: ActionWait, Pod: "c-1"}, reason: "CLUSTER FAILOVER in progress",
		},
		{
			name: "CLUSTER FAILOVER given up by Redis: the first shard's aborts roll back", change: toValkey, stop: at(ActionShardFailover, ""),
			given: func(c *redisCluster, s *Snapshot) { s.SwitchoverIssuedAt = s.Now.Add(-time.Minute) },
			want:  Action{Type: ActionEndShardSwitchover}, reason: "did not complete",
		},
		{
			name: "the replica serves the slots, the old master still says it does", change: toValkey, stop: at(ActionEndShardSwitchover, ""),
			given: func(c *redisCluster, s *Snapshot) {
				s.Pods[0].Obs.Cluster.Myself.Master, s.Pods[0].Obs.Cluster.Myself.Slots = true, s.Pods[1].Obs.Cluster.Myself.Slots
			},
			want: Action{Type: ActionWait},
		},
		{
			name: "the switchover is confirmed from both nodes", change: toValkey, stop: at(ActionEndShardSwitchover, ""),
			given: func(c *redisCluster, s *Snapshot) {},
			want:  Action{Type: ActionEndShardSwitchover, Pod: "c-1", Master: "c-0"},
		},
		{
			name: "the old master restarts once it is a replica", change: toValkey, stop: at(ActionRestartPod, "c-0"),
			given: func(c *redisCluster, s *Snapshot) {},
			want:  Action{Type: ActionRestartPod, Pod: "c-0"},
		},
		{
			name: "but not within SwitchoverSettle of the switchover: clients learn the new master from its MOVED", change: toValkey, stop: at(ActionRestartPod, "c-0"),
			given: func(c *redisCluster, s *Snapshot) {
				op := s.Operation.DeepCopy()
				op.StepStartedAt = &metav1.Time{Time: s.Now.Add(-time.Second)}
				s.Operation = op
			},
			want: Action{Type: ActionWait, Pod: "c-0"}, reason: "after its shard's switchover",
		},
		{
			name: "past a switchover to a newer RDB format a pod that does not come back is waited for", change: toValkey, stop: at(ActionCheckData, "c-0"),
			given: func(c *redisCluster, s *Snapshot) {
				s.Pods[0].Ready = false
				expired(s)
			},
			want: Action{Type: ActionNextStep, Pod: "c-0"}, reason: "no rollback: the master runs valkey 8.0.1",
		},
		{
			name: "past a switchover, a change without a new RDB format still rolls back", change: moreMemory, stop: at(ActionCheckData, "c-0"),
			given: func(c *redisCluster, s *Snapshot) {
				s.Pods[0].Ready = false
				expired(s)
			},
			want: Action{Type: ActionRollback, Pod: "c-0"},
		},
		{
			name: "a shard whose master does not answer waits for Redis Cluster's election", change: moreMemory, stop: at(ActionRestartPod, "c-3"),
			given: func(c *redisCluster, s *Snapshot) {
				s.Pods[2] = down(s.Pods[2], time.Minute)
				s.Pods[2].RoleLabel = ""
			},
			want: Action{Type: ActionWait}, reason: "shard 1 has no master that answers",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c, s := rolloutAt(t, tt.change, tt.stop)
			tt.given(c, &s)
			got := Next(s)
			expectAction(g, got, tt.want)
			g.Expect(got.Reason).To(ContainSubstring(tt.reason), "%s", got)
		})
	}
}

// A pod that does not come back after the first shard's switchover, on a
// change that writes no newer RDB format: the rollback returns every pod
// to the previous template the same way, replicas first, shard 0's
// master handed back before its pod restarts.
func TestShardedRollbackAfterASwitchover(t *testing.T) {
	g := NewWithT(t)
	c, s := rolloutAt(t, moreMemory, at(ActionCheckData, "c-0"))
	s.Pods[0].Ready = false
	s.StepDeadline = time.Minute
	op := s.Operation.DeepCopy()
	op.StepStartedAt = &metav1.Time{Time: s.Now.Add(-2 * time.Minute)}
	s.Operation = op
	a := Next(s)
	g.Expect(a.Type).To(Equal(ActionRollback))
	c.apply(t, &s, a)
	s.StepDeadline = 0
	steps, end := c.run(t, s)
	g.Expect(steps[len(steps)-1].Type).To(Equal(ActionNone), "%s", steps[len(steps)-1])
	g.Expect(restartsOf(steps)).To(Equal([]string{"c-5", "c-3", "c-0", "c-1"}))
	var switched []string
	for _, a := range steps {
		if a.Type == ActionShardFailover {
			switched = append(switched, a.Master+"→"+a.Pod)
		}
	}
	g.Expect(switched).To(Equal([]string{"c-1→c-0"}))
	for o, n := range c.nodes {
		g.Expect(cmp.Or(n.rev, "r1")).To(Equal("r1"), "c-%d runs the previous template", o)
	}
	g.Expect(end.Operation).To(BeNil())
	g.Expect(steps[len(steps)-2]).To(HaveField("Operation.Reason", ContainSubstring("did not become ready and in sync")))
}

// A shard of one pod restarts its master in place (its slots are not
// served meanwhile); nothing is handed over.
func TestShardedRolloutWithoutReplicas(t *testing.T) {
	g := NewWithT(t)
	c := newRedisCluster(3, 1)
	_, s := c.run(t, c.snapshot())
	moreMemory(&s.Spec)
	steps, _ := c.run(t, s)
	g.Expect(steps[len(steps)-1].Type).To(Equal(ActionNone), "%s", steps[len(steps)-1])
	g.Expect(restartsOf(steps)).To(Equal([]string{"c-0", "c-1", "c-2"}))
	for _, a := range steps {
		g.Expect(a.Type).NotTo(Equal(ActionShardFailover))
		if a.Type == ActionRestartPod {
			g.Expect(a.Reason).To(ContainSubstring("only pod"))
		}
	}
}

// Going back to Redis once a shard's master runs Valkey is refused before
// anything starts.
func TestShardedDowngradeRefused(t *testing.T) {
	g := NewWithT(t)
	c, s := formedSharded(t)
	toValkey(&s.Spec)
	_, s = c.run(t, s)
	g.Expect(s.Approved.Engine).To(Equal(cachev1alpha1.EngineValkey))
	s.Spec.Engine, s.Spec.Version = cachev1alpha1.EngineRedis, "7.0.15"
	steps, _ := c.run(t, s)
	g.Expect(stepTypes(steps)).To(Equal([]ActionType{ActionRefuseChange, ActionNone}))
	g.Expect(steps[0].Reason).To(ContainSubstring("Going back from valkey 8.0.1 to redis 7.0.15 is refused"))
}

// A shard-count change made during a rolling restart waits for it, and
// the Queued condition says so in shards.
func TestShardedChangeQueuedDuringARollout(t *testing.T) {
	g := NewWithT(t)
	c, s := rolloutAt(t, toValkey, at(ActionRestartPod, "c-3"))
	s.Spec.Replicas = 8
	s.Sharded.Shards = 4
	g.Expect(Queued(s)).To(Equal("shards 3→4: waits for Upgrade op1 to finish"))
	c.shards = 4
	steps, end := c.run(t, s)
	g.Expect(steps[len(steps)-1].Type).To(Equal(ActionNone), "%s", steps[len(steps)-1])
	var ops []cachev1alpha1.OperationType
	for _, a := range steps {
		if a.Type == ActionStartOperation {
			ops = append(ops, a.Operation.Type)
		}
	}
	g.Expect(ops).To(Equal([]cachev1alpha1.OperationType{cachev1alpha1.OperationScaling}), "the resharding starts once the upgrade is done")
	g.Expect(restartsOf(steps)[0]).To(Equal("c-3"))
	g.Expect(end.Approved.Replicas).To(Equal(int32(8)))
}

// A change of spec.highAvailability reaches the nodes live: the cluster
// parameters a node reports differently from what spec asks are set on
// every node with CONFIG SET, nothing restarts; a live parameter of
// spec.config changed at the same time goes with them.
func TestShardedClusterParametersAreSetLive(t *testing.T) {
	g := NewWithT(t)
	c, s := formedSharded(t)
	for _, n := range c.nodes {
		n.params = map[string]string{"cluster-node-timeout": "5000", "cluster-replica-no-failover": "no"}
	}
	s.Sharded.Parameters = map[string]string{"cluster-node-timeout": "5000", "cluster-replica-no-failover": "no"}
	steps, _ := c.run(t, s)
	g.Expect(stepTypes(steps)).To(Equal([]ActionType{ActionNone}), "the nodes run what spec asks")

	s.Sharded.Parameters = map[string]string{"cluster-node-timeout": "1000", "cluster-replica-no-failover": "no"}
	s.Spec.Config = map[string]cachev1alpha1.ConfigValue{"maxmemory-policy": "allkeys-lru"}
	run := func(s Snapshot) ([]Action, Snapshot) {
		var steps []Action
		for range 20 {
			fresh := c.next(s)
			a := Next(fresh)
			steps = append(steps, a)
			if a.Type == ActionNone || a.Type == ActionWait {
				return steps, fresh
			}
			c.apply(t, &fresh, a)
			s = fresh
		}
		t.Fatal("no end")
		return nil, s
	}
	steps, end := run(s)
	g.Expect(stepTypes(steps)).To(Equal([]ActionType{ActionStartOperation, ActionApplyConfig, ActionNone}))
	g.Expect(steps[0].Operation.Type).To(Equal(cachev1alpha1.OperationReconfigure))
	g.Expect(steps[1].Config).To(Equal(map[string]string{"cluster-node-timeout": "1000", "maxmemory-policy": "allkeys-lru"}))
	g.Expect(end.Approved.Config).To(HaveKeyWithValue("maxmemory-policy", cachev1alpha1.ConfigValue("allkeys-lru")))
	for _, n := range c.nodes {
		g.Expect(n.params["cluster-node-timeout"]).To(Equal("1000"))
		g.Expect(n.run).To(BeZero(), "nothing restarts")
	}

	// Only spec.highAvailability changed: the operation says so.
	s = end
	s.Sharded.Parameters = map[string]string{"cluster-node-timeout": "1000", "cluster-replica-no-failover": "yes"}
	steps, _ = run(s)
	g.Expect(stepTypes(steps)).To(Equal([]ActionType{ActionStartOperation, ActionApplyConfig, ActionNone}))
	g.Expect(steps[0].Reason).To(Equal("cluster-replica-no-failover no→yes (spec.highAvailability): applied live, no restart"))
	g.Expect(steps[1].Config).To(Equal(map[string]string{"cluster-replica-no-failover": "yes"}))
}

// A shard that Redis Cluster failed over by itself during its switchover
// (its master died, another replica won the election): the switchover is
// ended and the rollout goes on from the layout the nodes report.
func TestShardedSwitchoverOvertakenByAnElection(t *testing.T) {
	g := NewWithT(t)
	c := newRedisCluster(3, 3)
	_, s := c.run(t, c.snapshot())
	toValkey(&s.Spec)
	var a Action
	for range 200 {
		fresh := c.next(s)
		if a = Next(fresh); a.Type == ActionShardFailover {
			s = fresh
			break
		}
		c.apply(t, &fresh, a)
		s = fresh
	}
	expectAction(g, a, Action{Type: ActionShardFailover, Pod: "c-1", Master: "c-0"})
	// c-0 dies; c-2 wins the election; c-1 follows it.
	c.nodes[2].master, c.nodes[2].masterID, c.nodes[2].slots = true, "", c.nodes[0].slots
	c.nodes[1].masterID = c.nodes[2].id
	c.nodes[0].slots, c.nodes[0].down, c.nodes[0].master = nil, true, true
	steps, end := c.run(t, s)
	var ended Action
	for _, a := range steps {
		if a.Type == ActionEndShardSwitchover {
			ended = a
			break
		}
	}
	g.Expect(ended.Pod).To(BeEmpty(), "%s", ended)
	g.Expect(ended.Reason).To(ContainSubstring("c-2 serves the shard now"))
	g.Expect(ended.Operation.Step).To(Equal(cachev1alpha1.StepRestart), "past no return (c-2 runs valkey): the rollout goes on")
	// The dead old master is restarted as any outdated pod that serves
	// no slot, and waited for as a replica of the new master.
	g.Expect(restartsOf(steps)).To(Equal([]string{"c-0"}))
	g.Expect(steps[len(steps)-1]).To(HaveField("Reason", ContainSubstring("c-0 is not ready and in sync with shard 0's master c-2")))
	g.Expect(end.Operation).NotTo(BeNil())
}
