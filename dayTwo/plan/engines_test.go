package plan

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

// onValkey: a steady cluster that runs valkey 8.0.1 (migrated).
func onValkey(n, m int) Snapshot {
	s := cluster(n, m)
	v := version(s, "8.0.1")
	s.Spec, s.Approved = v, v.DeepCopy()
	s.StatefulSet.TemplateKey = renderer.TemplateKey(v)
	return s
}

// pastTheSwitchover: a migration in which c-1 took over; c-0, the old
// master, restarted on valkey and is not ready past the deadline.
func pastTheSwitchover() Snapshot {
	s := setPod(upgrading(cluster(3, 1), "c-0", "c-1", "c-2"), "c-0", func(p *PodState) { p.Ready = false })
	s.Operation.StepStartedAt = timeRef(now.Add(-2 * time.Minute))
	return s
}

// Engine and version changes are ordered by the RDB format each version
// reads (engines.go).
func TestPlanEngineChanges(t *testing.T) {
	backToRedis := func() Snapshot {
		s := onValkey(3, 1)
		s.Spec.Engine, s.Spec.Version = cachev1alpha1.EngineRedis, "7.0.15"
		return s
	}
	runPlanCases(t, []planCase{
		{
			name: "redis 7.0.15 → valkey 8.0.1 is an upgrade with a pre-check that says where rollback ends", want: ActionStartOperation,
			given: func() Snapshot { s := cluster(3, 0); s.Spec = version(s, "8.0.1"); return s }(),
			check: func(g Gomega, a Action) {
				g.Expect(a.Operation.Step).To(Equal(cachev1alpha1.StepPrecheck))
				g.Expect(a.Operation.Target.Engine).To(Equal(cachev1alpha1.EngineValkey))
				g.Expect(a.Operation.Previous.Engine).To(Equal(cachev1alpha1.Engine("")))
				g.Expect(a.Reason).To(Equal("engine redis 7.0.15→valkey 8.0.1: rolling restart; no rollback after the switchover: valkey 8.0.1 writes RDB 11, redis 7.0.15 reads RDB 10 at most"))
			},
		},
		{
			name: "valkey 8.0.1 → redis 7.0.15 is refused before anything starts", want: ActionRefuseChange, given: backToRedis(),
			check: func(g Gomega, a Action) {
				g.Expect(a.Values.Engine).To(Equal(cachev1alpha1.EngineRedis))
				g.Expect(a.Reason).To(HavePrefix("Going back from valkey 8.0.1 to redis 7.0.15 is refused: the master runs valkey 8.0.1, which writes RDB version 11, and redis 7.0.15 reads RDB version 10 and older"))
				g.Expect(a.Reason).To(ContainSubstring("restore a backup taken before the migration"))
			},
		},
		{
			name: "a refused downgrade is not tried again until spec changes", want: ActionNone,
			given: func() Snapshot {
				s := backToRedis()
				s.Blocked = &cachev1alpha1.RolloutBlock{Target: renderer.ValuesKey(s.Spec), Reason: cachev1alpha1.ReasonDowngradeRefused}
				return s
			}(),
		},
		{
			name: "redis 7.0.15 → 6.2.14 is refused too (RDB 10 → 9)", want: ActionRefuseChange,
			given: func() Snapshot { s := cluster(3, 0); s.Spec.Version = "6.2.14"; return s }(),
		},
		{
			name: "a valkey cluster takes other changes: more replicas", want: ActionStartOperation,
			given: func() Snapshot { s := onValkey(3, 0); s.Spec.Replicas = 4; return s }(),
			check: func(g Gomega, a Action) { g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationScaling)) },
		},
		{
			name: "migration: the replicas first, while the master runs redis", want: ActionRestartPod, pod: "c-2",
			given: upgrading(cluster(3, 0)),
		},
		{
			name: "migration: a valkey replica that does not come up before the switchover rolls back", want: ActionRollback, pod: "c-1",
			given: func() Snapshot {
				s := setPod(upgrading(cluster(3, 0), "c-2", "c-1"), "c-1", func(p *PodState) { p.Ready = false })
				s.Operation.StepStartedAt = timeRef(now.Add(-2 * time.Minute))
				return s
			}(),
			check: func(g Gomega, a Action) { g.Expect(a.Values.Engine).To(Equal(cachev1alpha1.Engine(""))) },
		},
		{
			name: "migration: the switchover goes to a valkey replica only", want: ActionNextStep, pod: "c-1",
			given: setPod(upgrading(cluster(3, 0), "c-1", "c-2"), "c-2", func(p *PodState) { p.Obs.Offset = 90 }),
			check: func(g Gomega, a Action) { g.Expect(a.Operation.ToPod).To(Equal("c-1")) },
		},
		{
			name: "migration: no switchover while a redis replica is left", want: ActionRestartPod, pod: "c-1",
			given: upgrading(cluster(3, 0), "c-2"),
		},
		{
			name: "migration: once the master runs valkey, a pod that does not come back is not rolled back; the operation says why", want: ActionNextStep, pod: "c-0",
			given: pastTheSwitchover(),
			check: func(g Gomega, a Action) {
				g.Expect(a.Operation.Step).To(Equal(cachev1alpha1.StepRestart))
				g.Expect(a.Operation.Reason).To(HavePrefix("engine redis 7.0.15→valkey 8.0.1: rolling restart — c-0 did not become ready and in sync within 1m0s"))
				g.Expect(a.Operation.Reason).To(ContainSubstring("no rollback: the master runs valkey 8.0.1 (RDB version 11), which redis 7.0.15 cannot replicate from"))
			},
		},
		{
			name: "migration: then it waits for the pod", want: ActionWait, pod: "c-0",
			given: func() Snapshot {
				s := pastTheSwitchover()
				s.Operation = Next(s).Operation
				return s
			}(),
			check: func(g Gomega, a Action) { g.Expect(a.Reason).To(ContainSubstring("no rollback")) },
		},
		{
			name: "a same-format change still rolls back after the switchover", want: ActionRollback, pod: "c-0",
			given: func() Snapshot {
				s := setPod(upgrading(cluster(3, 1), "c-0", "c-1", "c-2"), "c-0", func(p *PodState) { p.Ready = false })
				// The same version and engine, only resources: RDB 10 both ways.
				t := *s.Operation.Previous.DeepCopy()
				t.Resources.Limits = nil
				t.Config = map[string]cachev1alpha1.ConfigValue{"databases": "32"}
				s.Operation.Target, s.Spec, s.Approved = &t, t, t.DeepCopy()
				s.StatefulSet.TemplateKey = renderer.TemplateKey(t)
				s.Operation.StepStartedAt = timeRef(now.Add(-2 * time.Minute))
				return s
			}(),
		},
	})
}

// kubectl cache plan shows a refused downgrade as what it is.
func TestSimulateRefusedDowngrade(t *testing.T) {
	g := NewWithT(t)
	three := int32(3)
	base := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: cachev1alpha1.CacheClusterSpec{Engine: cachev1alpha1.EngineValkey, Version: "8.0.1", Replicas: &three}}
	head := base.DeepCopy()
	head.Spec.Engine, head.Spec.Version = cachev1alpha1.EngineRedis, "7.0.15"
	steps, err := Simulate(base, head, "", false)
	g.Expect(err).NotTo(HaveOccurred())
	var types []ActionType
	for _, a := range steps {
		types = append(types, a.Type)
	}
	g.Expect(types).To(ContainElement(ActionRefuseChange))
	g.Expect(types).NotTo(ContainElement(ActionRestartPod))
}
