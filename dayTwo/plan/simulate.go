package plan

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
	"github.com/cacheops/cacheops/renderer"
)

// Simulate plays a spec change on a model of a healthy cluster and returns
// the steps day-two takes, in order: the same Plan the controller runs,
// with every step assumed to succeed (pods restart, sync and answer at
// once). It is what `kubectl cache plan` shows a reviewer. base is the
// running cluster (its spec as approved), head the changed one; master is
// the pod that is master now ("" for ordinal 0); a sharded cluster's
// masters are read from base's status.shards (simulateSharded). templateChanged says that
// head's rendered pod template differs from base's: the StatefulSet gets a
// new revision even when none of the values day-two approves changed.
func Simulate(base, head *cachev1alpha1.CacheCluster, master string, templateChanged bool) ([]Action, error) {
	approved := renderer.SpecValues(base)
	if r := base.Status.Rollout; r != nil {
		approved = *r.RolloutValues.DeepCopy()
	}
	if head.IsSharded() {
		return simulateSharded(base, head, approved, templateChanged)
	}
	if master == "" {
		master = fmt.Sprintf("%s-0", base.Name)
	}
	w := newWorld(base.Name, approved, master)
	w.s.Spec = renderer.SpecValues(head)
	w.s.SwitchoverTo = head.Annotations[cachev1alpha1.AnnotationSwitchoverTo]
	if templateChanged {
		w.rev++
		w.s.StatefulSet.UpdateRevision = fmt.Sprintf("r%d", w.rev)
	}

	return play(nil, &w.s, w.apply, 500)
}

// play asks the planner for the next step of *s and applies it until
// there is none, after at most limit steps; the steps are appended to
// out. A Wait is a stall: in the model every step succeeds at once, so
// nothing would end it.
func play(out []Action, s *Snapshot, apply func(Action), limit int) ([]Action, error) {
	for range limit {
		a := Next(*s)
		switch a.Type {
		case ActionNone:
			return out, nil
		case ActionWait:
			return out, fmt.Errorf("the simulation stalls: %s", a)
		}
		out = append(out, a)
		apply(a)
	}
	return out, fmt.Errorf("the simulation did not converge in %d steps", limit)
}

// world is the simulated cluster.
type world struct {
	s   Snapshot
	rev int
}

func newWorld(name string, v cachev1alpha1.RolloutValues, master string) *world {
	w := &world{rev: 1}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w.s = Snapshot{
		Name: name, Now: now, ProbeTimeout: time.Second, AutoFailover: true, StepDeadline: time.Hour,
		CurrentMaster: master, Approved: v.DeepCopy(),
		StatefulSet: &StatefulSetState{Settled: true, TemplateKey: renderer.TemplateKey(v), Replicas: v.Replicas, UpdateRevision: "r1"},
	}
	for i := 0; i < int(v.Replicas); i++ {
		w.s.Pods = append(w.s.Pods, w.newPod(i, false))
	}
	return w
}

func (w *world) ip(i int) string { return fmt.Sprintf("10.0.0.%d", 10+i) }

// newPod is a pod of the current revision: a synced replica, or the master.
func (w *world) newPod(i int, fresh bool) PodState {
	name := fmt.Sprintf("%s-%d", w.s.Name, i)
	p := PodState{Name: name, IP: w.ip(i), Observed: true, Ready: true, Revision: w.s.StatefulSet.UpdateRevision, Created: w.s.Now,
		RoleLabel: cachev1alpha1.RoleReplica,
		Obs: probe.Observation{Pod: name, IP: w.ip(i), Reachable: true, LastSeen: w.s.Now, Role: "slave", MasterLinkUp: true, Keys: 1, Offset: 100,
			RunID: name + "@" + w.s.Now.Format(time.RFC3339)}}
	if name == w.s.CurrentMaster && !fresh {
		p.RoleLabel, p.Obs.Role, p.Obs.MasterLinkUp = cachev1alpha1.RoleMaster, "master", false
	} else if m, ok := w.s.Pod(w.s.CurrentMaster); ok {
		p.Obs.MasterHost = m.IP
	} else {
		p.Obs.MasterHost = w.ip(0)
	}
	return p
}

func (w *world) set(name string, f func(*PodState)) {
	for i := range w.s.Pods {
		if w.s.Pods[i].Name == name {
			f(&w.s.Pods[i])
		}
	}
}

// approve models day-one rendering the approved values: the StatefulSet
// takes them; a new template is a new revision; the count adds or removes
// pods (new pods join as synced replicas).
func (w *world) approve(v cachev1alpha1.RolloutValues) {
	w.s.Approved = v.DeepCopy()
	sts := w.s.StatefulSet
	if key := renderer.TemplateKey(v); key != sts.TemplateKey {
		w.rev++
		sts.TemplateKey, sts.UpdateRevision = key, fmt.Sprintf("r%d", w.rev)
	}
	sts.Replicas = v.Replicas
	var pods []PodState
	for _, p := range w.s.Pods {
		if p.Ordinal() < int(v.Replicas) {
			pods = append(pods, p)
		}
	}
	for i := len(pods); i < int(v.Replicas); i++ {
		pods = append(pods, w.newPod(i, true))
	}
	w.s.Pods = pods
}

func (w *world) apply(a Action) {
	s := &w.s
	s.Now = s.Now.Add(time.Second)
	switch a.Type {
	case ActionApprove, ActionPrecheckPass, ActionApplyConfig, ActionRollback:
		w.approve(*a.Values)
	case ActionEndSwitchover:
		if a.Values != nil {
			w.approve(*a.Values)
		}
	}
	switch a.Type {
	case ActionBootstrap:
		s.CurrentMaster = a.Pod
	case ActionStartOperation:
		op := a.Operation.DeepCopy()
		op.ID, op.StartedAt, op.StepStartedAt = "plan", metav1.NewTime(s.Now), timeRef(s.Now)
		s.Operation = op
	case ActionNextStep, ActionPrecheckPass, ActionRollback:
		s.Operation = a.Operation.DeepCopy()
		s.Precheck = nil
	case ActionPrecheckStart:
		s.Precheck = &PrecheckState{TemplateKey: renderer.TemplateKey(*a.Values), Ready: true}
	case ActionPrecheckFail:
		s.Operation, s.Precheck = nil, nil
	case ActionCheckData:
		p, _ := s.Pod(a.Pod)
		if s.DataChecks == nil {
			s.DataChecks = map[string]DataCheck{}
		}
		s.DataChecks[a.Pod] = DataCheck{RunID: p.Obs.RunID, Master: a.Master, Sampled: 1, At: s.Now}
	case ActionRefuseChange:
		s.Blocked = &cachev1alpha1.RolloutBlock{Target: renderer.ValuesKey(*a.Values), Reason: cachev1alpha1.ReasonDowngradeRefused, Message: a.Reason}
	case ActionRestartPod:
		op := s.Operation.DeepCopy()
		op.StepStartedAt = timeRef(s.Now)
		s.Operation = op
		w.set(a.Pod, func(p *PodState) {
			role, label := p.Obs.Role, p.RoleLabel
			*p = w.newPod(p.Ordinal(), true)
			if role == "master" {
				p.Obs.Role, p.RoleLabel, p.Obs.MasterHost, p.Obs.MasterLinkUp = "master", label, "", false
			}
		})
	case ActionUnlabel, ActionLabelMaster, ActionLabelReplica, ActionPromote:
		applyRoleStep(s, a)
	case ActionRepoint, ActionFence:
		m, _ := s.Pod(a.Master)
		w.set(a.Pod, func(p *PodState) { p.Obs.Role, p.Obs.MasterHost, p.Obs.MasterLinkUp = "slave", m.IP, true })
	case ActionGracefulSwitchover:
		to, _ := s.Pod(a.Pod)
		w.set(a.Pod, func(p *PodState) { p.Obs.Role, p.Obs.MasterHost, p.Obs.MasterLinkUp = "master", "", false })
		w.set(a.Master, func(p *PodState) { p.Obs.Role, p.Obs.MasterHost, p.Obs.MasterLinkUp = "slave", to.IP, true })
	case ActionEndSwitchover:
		if a.Pod != "" {
			s.CurrentMaster = a.Pod
		}
		if s.Operation != nil && s.Operation.Type == cachev1alpha1.OperationSwitchover {
			s.SwitchoverTo = ""
		}
		s.Operation = a.Operation.DeepCopy()
	case ActionApplyConfig:
		s.Operation = nil
	case ActionCompleteOperation:
		if a.Values != nil {
			w.approve(*a.Values)
		}
		s.Operation = nil
	case ActionClearSwitchoverRequest:
		s.SwitchoverTo = ""
	case ActionStartFailover, ActionCompleteFailover, ActionRecreate:
		// A healthy cluster never fails over in the simulation.
	}
	if s.Operation == nil && s.SwitchoverTo != "" && s.CurrentMaster == s.SwitchoverTo {
		s.SwitchoverTo = ""
	}
}

// applyRoleStep plays a label or promote step on a model cluster, as every
// step succeeds there: the simulation's world and the failover tests'.
func applyRoleStep(s *Snapshot, a Action) {
	for i := range s.Pods {
		p := &s.Pods[i]
		if p.Name != a.Pod {
			continue
		}
		switch a.Type {
		case ActionUnlabel:
			p.RoleLabel = ""
		case ActionLabelMaster:
			p.RoleLabel = cachev1alpha1.RoleMaster
		case ActionLabelReplica:
			p.RoleLabel = cachev1alpha1.RoleReplica
		case ActionPromote:
			p.Obs.Role, p.Obs.MasterHost, p.Obs.MasterLinkUp = "master", "", false
		}
	}
}
