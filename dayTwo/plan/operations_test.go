package plan

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

const ip3, ip4 = "10.244.0.13", "10.244.0.14"

// cluster builds a steady snapshot of n pods with the master on ordinal m.
func cluster(n, m int) Snapshot {
	ips := []string{ip0, ip1, ip2, ip3, ip4}
	var pods []PodState
	for i := 0; i < n; i++ {
		name := "c-" + string(rune('0'+i))
		if i == m {
			pods = append(pods, pod(name, ips[i], "master", "", "master", 100, 10))
		} else {
			pods = append(pods, pod(name, ips[i], "slave", ips[m], "replica", 100, 10))
		}
	}
	return steady(Snapshot{Now: now, CurrentMaster: "c-" + string(rune('0'+m)), Pods: pods, StepDeadline: time.Minute, AutoFailover: true, ProbeTimeout: time.Second})
}

func withOp(s Snapshot, op *cachev1alpha1.OperationStatus) Snapshot {
	op.ID, op.StartedAt = "op1", metav1.NewTime(now.Add(-time.Second))
	if op.StepStartedAt == nil {
		op.StepStartedAt = timeRef(now.Add(-time.Second))
	}
	s.Operation = op
	return s
}

// version is the approved values of s on another version; 8.0.1 is
// valkey's.
func version(s Snapshot, v string) cachev1alpha1.RolloutValues {
	t := *s.Approved.DeepCopy()
	t.Version = v
	if v == "8.0.1" {
		t.Engine = cachev1alpha1.EngineValkey
	}
	return t
}

// upgrading: an upgrade to valkey 8.0.1 past its pre-check; the StatefulSet is on
// revision r2; the pods named in updated run it. Every replica passed its
// data check against the current master (datacheck_test.go tests the
// checks).
func upgrading(s Snapshot, updated ...string) Snapshot {
	s.DataChecks = map[string]DataCheck{}
	for _, p := range s.Pods {
		s.DataChecks[p.Name] = DataCheck{RunID: p.Obs.RunID, Master: s.CurrentMaster, Sampled: 32}
	}
	prev := *s.Approved.DeepCopy()
	target := version(s, "8.0.1")
	s.Spec, s.Approved = target, target.DeepCopy()
	s.StatefulSet = &StatefulSetState{Settled: true, TemplateKey: renderer.TemplateKey(target), Replicas: target.Replicas, UpdateRevision: "r2"}
	for i := range s.Pods {
		for _, u := range updated {
			if s.Pods[i].Name == u {
				s.Pods[i].Revision = "r2"
			}
		}
	}
	return withOp(s, &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationUpgrade, Step: cachev1alpha1.StepRestart, Target: &target, Previous: &prev, Reason: "engine redis 7.0.15→valkey 8.0.1: rolling restart"})
}

func setPod(s Snapshot, name string, f func(*PodState)) Snapshot {
	pods := append([]PodState(nil), s.Pods...)
	for i := range pods {
		if pods[i].Name == name {
			f(&pods[i])
		}
	}
	s.Pods = pods
	return s
}

func TestPlanOperations(t *testing.T) {
	scaleDown := func() Snapshot {
		s := cluster(3, 2)
		s.Spec.Replicas = 2
		target := *s.Approved.DeepCopy()
		target.Replicas = 2
		return withOp(s, &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationScaling, Target: &target})
	}
	switchover := func() Snapshot {
		s := cluster(3, 2)
		return withOp(s, &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationSwitchover, Step: cachev1alpha1.StepSwitchover, FromPod: "c-2", ToPod: "c-1"})
	}
	precheck := func() Snapshot {
		s := cluster(3, 0)
		target, prev := version(s, "8.0.1"), *s.Approved.DeepCopy()
		s.Spec = target
		return withOp(s, &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationUpgrade, Step: cachev1alpha1.StepPrecheck, Target: &target, Previous: &prev})
	}
	keyOf := func(v string) string { s := cluster(3, 0); return renderer.TemplateKey(version(s, v)) }
	valuesOf := func(v string) string { s := cluster(3, 0); return renderer.ValuesKey(version(s, v)) }

	tests := []planCase{
		{name: "spec is approved first", given: func() Snapshot { s := cluster(3, 0); s.Approved = nil; return s }(), want: ActionApprove},
		{
			name: "more replicas start a scaling", given: func() Snapshot { s := cluster(3, 0); s.Spec.Replicas = 5; return s }(), want: ActionStartOperation,
			check: func(g Gomega, a Action) {
				g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationScaling))
				g.Expect(a.Operation.Target.Replicas).To(Equal(int32(5)))
			},
		},
		{
			name: "a scale-down that removes the master says so", given: func() Snapshot { s := cluster(3, 2); s.Spec.Replicas = 2; return s }(), want: ActionStartOperation,
			check: func(g Gomega, a Action) {
				g.Expect(a.Reason).To(Equal("replicas 3→2: switchover first, the master is on ordinal 2"))
			},
		},
		{
			name: "scale-down: switchover to an in-sync replica that stays, before the count shrinks", given: scaleDown(), want: ActionNextStep, pod: "c-0",
			check: func(g Gomega, a Action) {
				g.Expect(a.Operation.Step).To(Equal(cachev1alpha1.StepSwitchover))
				g.Expect(a.Operation.FromPod).To(Equal("c-2"))
			},
		},
		{
			name: "scale-down: the count shrinks once the master stays",
			given: func() Snapshot {
				s := scaleDown()
				s = setPod(s, "c-2", func(p *PodState) { p.Obs.Role, p.RoleLabel, p.Obs.MasterHost = "slave", "replica", ip0 })
				s = setPod(s, "c-0", func(p *PodState) { p.Obs.Role, p.RoleLabel, p.Obs.MasterHost = "master", "master", "" })
				s = setPod(s, "c-1", func(p *PodState) { p.Obs.MasterHost = ip0 })
				s.CurrentMaster = "c-0"
				return s
			}(), want: ActionApprove,
			check: func(g Gomega, a Action) { g.Expect(a.Values.Replicas).To(Equal(int32(2))) },
		},
		{name: "switchover: traffic off the master first", given: switchover(), want: ActionUnlabel, pod: "c-2"},
		{
			name:  "switchover: Redis FAILOVER once the master has no traffic",
			given: setPod(switchover(), "c-2", func(p *PodState) { p.RoleLabel = "" }), want: ActionGracefulSwitchover, pod: "c-1",
		},
		{
			name:  "switchover: waits while Redis fails over",
			given: setPod(setPod(switchover(), "c-2", func(p *PodState) { p.RoleLabel = "" }), "c-2", func(p *PodState) { p.Obs.FailoverState = "waiting-for-sync" }),
			want:  ActionWait,
		},
		{
			name: "switchover: the new master is recorded before it gets traffic",
			given: setPod(setPod(switchover(), "c-2", func(p *PodState) { p.RoleLabel, p.Obs.Role, p.Obs.MasterHost = "", "slave", ip1 }),
				"c-1", func(p *PodState) { p.Obs.Role, p.Obs.MasterHost = "master", "" }),
			want: ActionEndSwitchover, pod: "c-1",
		},
		{
			name: "switchover: a FAILOVER Redis gave up on is aborted at once, the master keeps its role",
			given: func() Snapshot {
				s := setPod(switchover(), "c-2", func(p *PodState) { p.RoleLabel = "" })
				s.SwitchoverIssuedAt = now.Add(-5 * time.Second)
				return s
			}(),
			want: ActionEndSwitchover,
			check: func(g Gomega, a Action) {
				g.Expect(a.Pod).To(BeEmpty())
				g.Expect(a.Reason).To(ContainSubstring("Redis FAILOVER did not complete"))
			},
		},
		{
			name: "switchover: an upgrade whose master cannot be handed over rolls back",
			given: func() Snapshot {
				s := upgrading(cluster(3, 0), "c-1", "c-2")
				s.Operation.Step, s.Operation.FromPod, s.Operation.ToPod = cachev1alpha1.StepSwitchover, "c-0", "c-1"
				s = setPod(s, "c-0", func(p *PodState) { p.RoleLabel = "" })
				s.SwitchoverIssuedAt = now.Add(-5 * time.Second)
				return s
			}(),
			want: ActionEndSwitchover,
			check: func(g Gomega, a Action) {
				g.Expect(a.Operation.Step).To(Equal(cachev1alpha1.StepRollback))
				g.Expect(a.Values.Version).To(Equal("7.0.15"))
			},
		},
		{
			name: "the old master never loses its label while another pod is promoted: labels first",
			given: func() Snapshot {
				// c-1 recorded as master but a replica in Redis; c-2 still labelled master.
				s := cluster(3, 2)
				s.CurrentMaster = "c-1"
				s = setPod(s, "c-2", func(p *PodState) { p.Obs.Role, p.Obs.MasterHost = "slave", ip1 })
				return s
			}(),
			want: ActionUnlabel, pod: "c-2",
		},
		{
			name: "switchover: ends with the new master recorded, even when already labelled",
			given: setPod(setPod(switchover(), "c-2", func(p *PodState) { p.RoleLabel, p.Obs.Role, p.Obs.MasterHost = "replica", "slave", ip1 }),
				"c-1", func(p *PodState) { p.Obs.Role, p.Obs.MasterHost, p.RoleLabel = "master", "", "master" }),
			want: ActionEndSwitchover, pod: "c-1",
			check: func(g Gomega, a Action) { g.Expect(a.Operation).To(BeNil()) },
		},
		{
			name:  "switchover: never two master labels, even when the target promoted itself",
			given: setPod(switchover(), "c-1", func(p *PodState) { p.Obs.Role, p.Obs.MasterHost = "master", "" }),
			want:  ActionUnlabel, pod: "c-2",
		},
		{
			name: "a new version starts an upgrade with a pre-check", given: func() Snapshot {
				s := cluster(3, 0)
				s.Spec.Engine, s.Spec.Version = cachev1alpha1.EngineValkey, "8.0.1"
				return s
			}(), want: ActionStartOperation,
			check: func(g Gomega, a Action) {
				g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationUpgrade))
				g.Expect(a.Operation.Step).To(Equal(cachev1alpha1.StepPrecheck))
				g.Expect(a.Operation.Previous.Version).To(Equal("7.0.15"))
				g.Expect(a.Reason).To(HavePrefix("engine redis 7.0.15→valkey 8.0.1: rolling restart"))
			},
		},
		{
			name: "a blocked template is not tried again", want: ActionNone,
			given: func() Snapshot {
				s := cluster(3, 0)
				s.Spec.Engine, s.Spec.Version = cachev1alpha1.EngineValkey, "8.0.1"
				s.Blocked = &cachev1alpha1.RolloutBlock{Target: valuesOf("8.0.1"), Reason: cachev1alpha1.ReasonUpgradePrecheckFailed}
				return s
			}(),
		},
		{name: "pre-check: start the pod", given: precheck(), want: ActionPrecheckStart},
		{name: "pre-check: wait for it", given: func() Snapshot { s := precheck(); s.Precheck = &PrecheckState{TemplateKey: keyOf("8.0.1")}; return s }(), want: ActionWait},
		{
			name: "pre-check: a pod of another template is replaced", want: ActionPrecheckStart,
			given: func() Snapshot {
				s := precheck()
				s.Precheck = &PrecheckState{TemplateKey: keyOf("7.0.15"), Ready: true}
				return s
			}(),
		},
		{
			name: "pre-check: ready → approve the new template and restart", want: ActionPrecheckPass,
			given: func() Snapshot {
				s := precheck()
				s.Precheck = &PrecheckState{TemplateKey: keyOf("8.0.1"), Ready: true}
				return s
			}(),
			check: func(g Gomega, a Action) {
				g.Expect(a.Values.Version).To(Equal("8.0.1"))
				g.Expect(a.Operation.Step).To(Equal(cachev1alpha1.StepRestart))
			},
		},
		{
			name: "pre-check: a pod that cannot start blocks the change", want: ActionPrecheckFail,
			given: func() Snapshot {
				s := precheck()
				s.Precheck = &PrecheckState{TemplateKey: keyOf("8.0.1"), Failure: "ErrImagePull"}
				return s
			}(),
		},
		{
			name: "pre-check: a pod that never gets ready blocks the change after the deadline", want: ActionPrecheckFail,
			given: func() Snapshot {
				s := precheck()
				s.Precheck = &PrecheckState{TemplateKey: keyOf("8.0.1")}
				s.Operation.StepStartedAt = timeRef(now.Add(-2 * time.Minute))
				return s
			}(),
		},
		{name: "upgrade: replicas restart from the highest ordinal", given: upgrading(cluster(3, 0)), want: ActionRestartPod, pod: "c-2"},
		{name: "upgrade: then the next replica", given: upgrading(cluster(3, 0), "c-2"), want: ActionRestartPod, pod: "c-1"},
		{
			name: "upgrade: never the next pod while a restarted one is not in sync", want: ActionWait, pod: "c-2",
			given: setPod(upgrading(cluster(3, 0), "c-2"), "c-2", func(p *PodState) { p.Obs.MasterLinkUp = false }),
		},
		{
			name: "upgrade: a restarted pod that is not back is waited for", want: ActionWait, pod: "c-2",
			given: func() Snapshot { s := upgrading(cluster(3, 0)); s.Pods = s.Pods[:2]; return s }(),
		},
		{
			name: "upgrade: a restarted pod that stays out of sync past the deadline rolls back", want: ActionRollback, pod: "c-2",
			given: func() Snapshot {
				s := setPod(upgrading(cluster(3, 0), "c-2"), "c-2", func(p *PodState) { p.Ready = false })
				s.Operation.StepStartedAt = timeRef(now.Add(-2 * time.Minute))
				return s
			}(),
			check: func(g Gomega, a Action) {
				g.Expect(a.Values.Version).To(Equal("7.0.15"))
				g.Expect(a.Operation.Step).To(Equal(cachev1alpha1.StepRollback))
			},
		},
		{
			name: "upgrade: the master last, after a switchover to an upgraded replica", want: ActionNextStep, pod: "c-1",
			given: setPod(upgrading(cluster(3, 0), "c-1", "c-2"), "c-2", func(p *PodState) { p.Obs.Offset = 90 }),
			check: func(g Gomega, a Action) {
				g.Expect(a.Operation.Step).To(Equal(cachev1alpha1.StepSwitchover))
				g.Expect(a.Operation.FromPod).To(Equal("c-0"))
			},
		},
		{
			name: "upgrade: the old master restarts once it is a replica", want: ActionRestartPod, pod: "c-0",
			given: func() Snapshot {
				s := upgrading(cluster(3, 1), "c-1", "c-2")
				return s
			}(),
		},
		{name: "upgrade: done when every pod runs the template", given: upgrading(cluster(3, 0), "c-0", "c-1", "c-2"), want: ActionCompleteOperation},
		{
			name: "rollback: restarts the pods on the new template, then ends blocked", want: ActionCompleteOperation,
			given: func() Snapshot {
				// Back on the previous template (revision r1), every pod on it.
				s := upgrading(cluster(3, 0))
				s.Operation.Step, s.Operation.Reason = cachev1alpha1.StepRollback, "rollback: c-2 did not become ready"
				s.StatefulSet.TemplateKey, s.StatefulSet.UpdateRevision = renderer.TemplateKey(*s.Operation.Previous), "r1"
				return s
			}(),
			check: func(g Gomega, a Action) { g.Expect(a.Operation.Reason).To(Equal("rollback: c-2 did not become ready")) },
		},
		{
			name: "a live parameter is set without restarts", want: ActionStartOperation,
			given: func() Snapshot {
				s := cluster(3, 0)
				s.Spec.Config = map[string]cachev1alpha1.ConfigValue{"maxmemory": "100mb"}
				return s
			}(),
			check: func(g Gomega, a Action) {
				g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationReconfigure))
				g.Expect(a.Reason).To(Equal("maxmemory 100mb: applied live, no restart"))
			},
		},
		{
			name: "reconfigure: CONFIG SET only what changed", want: ActionApplyConfig,
			given: func() Snapshot {
				s := cluster(3, 0)
				s.Approved.Config = map[string]cachev1alpha1.ConfigValue{"maxmemory": "100mb", "timeout": "0"}
				target := *s.Approved.DeepCopy()
				target.Config = map[string]cachev1alpha1.ConfigValue{"maxmemory": "200mb", "timeout": "0"}
				s.Spec = target
				return withOp(s, &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationReconfigure, Target: &target})
			}(),
			check: func(g Gomega, a Action) { g.Expect(a.Config).To(Equal(map[string]string{"maxmemory": "200mb"})) },
		},
		{
			name: "a restart-only parameter rolls the pods", want: ActionStartOperation,
			given: func() Snapshot {
				s := cluster(3, 0)
				s.Spec.Config = map[string]cachev1alpha1.ConfigValue{"databases": "32"}
				return s
			}(),
			check: func(g Gomega, a Action) {
				g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationUpgrade))
				g.Expect(a.Operation.RestartAll).To(BeFalse())
			},
		},
		{
			name: "removing a live parameter restarts every pod", want: ActionStartOperation,
			given: func() Snapshot {
				s := cluster(3, 0)
				s.Approved.Config = map[string]cachev1alpha1.ConfigValue{"maxmemory": "100mb"}
				return s
			}(),
			check: func(g Gomega, a Action) { g.Expect(a.Operation.RestartAll).To(BeTrue()) },
		},
		{
			name: "a requested switchover starts when the target is in sync", want: ActionStartOperation, pod: "c-2",
			given: func() Snapshot { s := cluster(3, 0); s.SwitchoverTo = "c-2"; return s }(),
			check: func(g Gomega, a Action) { g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationSwitchover)) },
		},
		{
			name: "a switchover request whose target is not in sync does not hold up other changes", want: ActionStartOperation,
			given: func() Snapshot {
				s := setPod(cluster(3, 0), "c-2", func(p *PodState) { p.Obs.MasterLinkUp = false })
				s.SwitchoverTo, s.Spec.Replicas = "c-2", 4
				return s
			}(),
			check: func(g Gomega, a Action) { g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationScaling)) },
		},
		{
			name: "a switchover to the master is dropped", want: ActionClearSwitchoverRequest, pod: "c-0",
			given: func() Snapshot { s := cluster(3, 0); s.SwitchoverTo = "c-0"; return s }(),
		},
		{
			name: "a failover pre-empts an upgrade", want: ActionStartFailover, pod: "c-1",
			given: setPod(upgrading(cluster(3, 0), "c-2"), "c-0", func(p *PodState) { *p = down(*p, time.Minute) }),
		},
	}
	runPlanCases(t, tests)
}

// planCase is one decision of Plan: given a snapshot, the step it takes
// (and the pod, and whatever check says).
type planCase struct {
	name  string
	given Snapshot
	want  ActionType
	pod   string
	check func(Gomega, Action)
}

func runPlanCases(t *testing.T, cases []planCase) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := Next(tt.given)
			g.Expect(got.Type).To(Equal(tt.want), "%s", got)
			if tt.pod != "" {
				g.Expect(got.Pod).To(Equal(tt.pod), "%s", got)
			}
			if tt.check != nil {
				tt.check(g, got)
			}
		})
	}
}

func TestQueuedSaysWhatWaits(t *testing.T) {
	g := NewWithT(t)
	s := upgrading(cluster(3, 0), "c-2")
	g.Expect(Queued(s)).To(BeEmpty())
	s.Spec.Replicas = 5
	g.Expect(Queued(s)).To(Equal("replicas 3→5: waits for Upgrade op1 to finish"))
}

func TestSimulateVersionBump(t *testing.T) {
	g := NewWithT(t)
	three := int32(3)
	base := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: cachev1alpha1.CacheClusterSpec{Version: "7.0.15", Replicas: &three}}
	head := base.DeepCopy()
	head.Spec.Engine, head.Spec.Version = cachev1alpha1.EngineValkey, "8.0.1"
	five := int32(5)
	head.Spec.Replicas = &five
	steps, err := Simulate(base, head, "", false)
	g.Expect(err).NotTo(HaveOccurred())
	var restarts, switchovers, ops []string
	for _, a := range steps {
		switch a.Type {
		case ActionRestartPod:
			restarts = append(restarts, a.Pod)
		case ActionGracefulSwitchover:
			switchovers = append(switchovers, a.Master+"→"+a.Pod)
		case ActionStartOperation:
			ops = append(ops, a.Reason)
		}
	}
	g.Expect(ops).To(Equal([]string{"engine redis 7.0.15→valkey 8.0.1: rolling restart; no rollback after the switchover: valkey 8.0.1 writes RDB 11, redis 7.0.15 reads RDB 10 at most", "replicas 3→5"}))
	g.Expect(restarts).To(Equal([]string{"c-2", "c-1", "c-0"}))
	g.Expect(switchovers).To(Equal([]string{"c-0→c-1"}))
}

func TestSimulateScaleDownMovesTheMasterFirst(t *testing.T) {
	g := NewWithT(t)
	five, three := int32(5), int32(3)
	base := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: cachev1alpha1.CacheClusterSpec{Version: "7.0.15", Replicas: &five}}
	head := base.DeepCopy()
	head.Spec.Replicas = &three
	steps, err := Simulate(base, head, "c-4", false)
	g.Expect(err).NotTo(HaveOccurred())
	at := map[ActionType]int{}
	for i, a := range steps {
		if _, seen := at[a.Type]; !seen {
			at[a.Type] = i
		}
		if a.Type == ActionApprove {
			g.Expect(a.Values.Replicas).To(Equal(int32(3)))
		}
	}
	g.Expect(at).To(HaveKey(ActionGracefulSwitchover))
	g.Expect(at).To(HaveKey(ActionApprove))
	g.Expect(at[ActionGracefulSwitchover]).To(BeNumerically("<", at[ActionApprove]), "the master moves before the count shrinks")
}

func TestSimulateRequestedSwitchoverToTheBestReplicaEnds(t *testing.T) {
	g := NewWithT(t)
	three := int32(3)
	base := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: cachev1alpha1.CacheClusterSpec{Version: "7.0.15", Replicas: &three}}
	head := base.DeepCopy()
	head.Annotations = map[string]string{cachev1alpha1.AnnotationSwitchoverTo: cachev1alpha1.SwitchoverToBest}
	steps, err := Simulate(base, head, "", false)
	g.Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, a := range steps {
		if a.Type == ActionGracefulSwitchover {
			n++
		}
	}
	g.Expect(n).To(Equal(1), "one switchover, not one after another")
}
