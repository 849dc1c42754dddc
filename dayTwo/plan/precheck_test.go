package plan

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

// The pre-check starts on a copy of a replica's data and passes only when
// the new version holds the copy's keys (precheck.go).
func TestPlanPrecheckOnACopyOfTheData(t *testing.T) {
	precheck := func(m int) Snapshot {
		s := cluster(3, m)
		target, prev := version(s, "8.0.1"), *s.Approved.DeepCopy()
		s.Spec = target
		return withOp(s, &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationUpgrade, Step: cachev1alpha1.StepPrecheck, Target: &target, Previous: &prev, StepStartedAt: timeRef(now)})
	}
	seeded := func(seed SeedState) Snapshot {
		s := precheck(0)
		s.Precheck = &PrecheckState{TemplateKey: renderer.TemplateKey(*s.Operation.Target), Ready: true, Seed: &seed}
		return s
	}
	copied := SeedState{Source: ip1 + ":6379", Keys: 1000, ExpiringKeys: 10, Loaded: -1}
	loaded := func(n int64) SeedState { s := copied; s.Loaded = n; return s }
	t.Run("sharded: no copy (a shard's dump is not the cluster's data)", func(t *testing.T) {
		s := precheck(0)
		s.Sharded = &ShardedState{}
		if src, ok := seedSource(s); ok {
			t.Fatalf("seed source %s in sharded mode", src.Name)
		}
	})
	runPlanCases(t, []planCase{
		{
			name: "the copy comes from an in-sync replica, not the master", want: ActionPrecheckStart, pod: "c-1", given: precheck(0),
			check: func(g Gomega, a Action) { g.Expect(a.Reason).To(ContainSubstring("on a copy of c-1's data")) },
		},
		{
			name: "a replica of the highest offset is the source", want: ActionPrecheckStart, pod: "c-2",
			given: setPod(precheck(0), "c-2", func(p *PodState) { p.Obs.Offset = 200 }),
		},
		{
			name: "no replica in sync: the copy comes from the master", want: ActionPrecheckStart, pod: "c-0",
			given: setPod(setPod(precheck(0), "c-1", func(p *PodState) { p.Obs.MasterLinkUp = false }), "c-2", func(p *PodState) { p.Ready = false }),
		},
		{name: "ready, keys not counted yet: wait", want: ActionWait, given: seeded(copied)},
		{
			name: "ready, the count could not be read past the deadline: fail", want: ActionPrecheckFail,
			given: func() Snapshot {
				c := copied
				c.LoadErr = "DBSIZE: i/o timeout"
				s := seeded(c)
				s.Operation.StepStartedAt = timeRef(now.Add(-2 * time.Minute))
				return s
			}(),
			check: func(g Gomega, a Action) { g.Expect(a.Reason).To(ContainSubstring("DBSIZE: i/o timeout")) },
		},
		{
			name: "every key of the copy: pass", want: ActionPrecheckPass, given: seeded(loaded(1000)),
			check: func(g Gomega, a Action) {
				g.Expect(a.Reason).To(Equal("valkey 8.0.1 starts with the configuration on a copy of the data of " + ip1 + ":6379 and holds its 1000 keys in database 0"))
				g.Expect(a.Operation.Step).To(Equal(cachev1alpha1.StepRestart))
			},
		},
		{name: "short by keys that may have expired since the dump: pass", want: ActionPrecheckPass, given: seeded(loaded(990))},
		{
			name: "short by more than the keys with a TTL: fail", want: ActionPrecheckFail, given: seeded(loaded(989)),
			check: func(g Gomega, a Action) {
				g.Expect(a.Reason).To(Equal("valkey 8.0.1 started on a copy of the data of " + ip1 + ":6379 and holds 989 keys in database 0, the copy has 1000 (10 with a TTL)"))
			},
		},
		{name: "more keys than the copy: fail", want: ActionPrecheckFail, given: seeded(loaded(1001))},
		{
			name: "a dump whose header could not be read: pass on the load, saying so", want: ActionPrecheckPass,
			given: seeded(SeedState{Source: "x", Keys: -1, ExpiringKeys: -1, Loaded: 7}),
			check: func(g Gomega, a Action) { g.Expect(a.Reason).To(ContainSubstring("could not be read")) },
		},
		{
			name: "the copy failed or the server refused it: fail with the pod's reason", want: ActionPrecheckFail,
			given: func() Snapshot {
				s := precheck(0)
				s.Precheck = &PrecheckState{TemplateKey: renderer.TemplateKey(*s.Operation.Target), Failure: "FATAL: Data file was created with a Valkey server configured to handle more than 4 databases"}
				return s
			}(),
			check: func(g Gomega, a Action) { g.Expect(a.Reason).To(ContainSubstring("more than 4 databases")) },
		},
	})
}
