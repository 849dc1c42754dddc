package plan

import (
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

// The steps of operations other than failover.

// StepRollbackSwitchover is the switchover inside a rollback.
const StepRollbackSwitchover = "RollbackSwitchover"

func InSwitchover(op *cachev1alpha1.OperationStatus) bool {
	return op != nil && (op.Step == cachev1alpha1.StepSwitchover || op.Step == StepRollbackSwitchover)
}

// planOperations continues the operation in progress, or starts the next
// one when spec asks for something the pods do not run yet. The topology
// is healthy when it is called.
func planOperations(s Snapshot) Action {
	if op := s.Operation; op != nil {
		switch op.Type {
		case cachev1alpha1.OperationScaling:
			return planScaling(s)
		case cachev1alpha1.OperationUpgrade:
			return planUpgrade(s)
		case cachev1alpha1.OperationReconfigure:
			return planReconfigure(s)
		case cachev1alpha1.OperationBackup:
			return planBackup(s)
		}
		return Action{Type: ActionWait, Reason: fmt.Sprintf("operation %s of unknown type %s", op.ID, op.Type)}
	}
	return nextOperation(s)
}

// nextOperation chooses the next change to roll out: a requested
// switchover, then a new pod template, then live parameters, then the
// number of pods.
func nextOperation(s Snapshot) Action {
	master, _ := s.Pod(s.CurrentMaster)
	// A requested switchover first; while its target is not in sync yet,
	// the other changes go on.
	var waitForTarget *Action
	if to := s.SwitchoverTo; to != "" {
		if to == cachev1alpha1.SwitchoverToBest {
			to = bestInSync(s, master, func(PodState) bool { return true })
		}
		p, ok := s.Pod(to)
		switch {
		case to == "":
			waitForTarget = &Action{Type: ActionWait, Reason: "switchover requested; waiting for a replica to be ready and in sync"}
		case to == s.CurrentMaster:
			return Action{Type: ActionClearSwitchoverRequest, Pod: to, Reason: to + " is the master already"}
		case !ok:
			return Action{Type: ActionClearSwitchoverRequest, Pod: to, Reason: "no pod " + to + " in this cluster"}
		case !inSync(p, master):
			waitForTarget = &Action{Type: ActionWait, Pod: to, Reason: "switchover requested; waiting for " + to + " to be ready and in sync"}
		default:
			return Action{Type: ActionStartOperation, Pod: to, Reason: "requested switchover", Operation: &cachev1alpha1.OperationStatus{
				Type: cachev1alpha1.OperationSwitchover, FromPod: s.CurrentMaster, ToPod: to,
				Reason: fmt.Sprintf("switchover %s→%s requested", s.CurrentMaster, to), Step: cachev1alpha1.StepSwitchover,
			}}
		}
	}
	if a := nextChange(s); a.Type != ActionNone {
		return a
	}
	if waitForTarget != nil {
		return *waitForTarget
	}
	// Backups last: every change from git goes first.
	if s.PendingBackup != "" {
		return Action{Type: ActionStartOperation, Reason: "backup " + s.PendingBackup, Operation: &cachev1alpha1.OperationStatus{
			Type: cachev1alpha1.OperationBackup, Backup: s.PendingBackup, Reason: "backup " + s.PendingBackup,
		}}
	}
	return Action{Type: ActionNone}
}

// nextChange chooses the next spec change to roll out: what the pods run
// (nextPodChange), then their number.
func nextChange(s Snapshot) Action {
	if a := nextPodChange(s); a.Type != ActionNone {
		return a
	}
	a := *s.Approved
	master, _ := s.Pod(s.CurrentMaster)
	if s.Spec.Replicas != a.Replicas {
		target := a
		target.Replicas = s.Spec.Replicas
		reason := fmt.Sprintf("replicas %d→%d", a.Replicas, target.Replicas)
		if target.Replicas < a.Replicas && master.Ordinal() >= int(target.Replicas) {
			reason += fmt.Sprintf(": switchover first, the master is on ordinal %d", master.Ordinal())
		}
		return Action{Type: ActionStartOperation, Reason: reason, Operation: &cachev1alpha1.OperationStatus{
			Type: cachev1alpha1.OperationScaling, Reason: reason, Target: target.DeepCopy(),
		}}
	}
	return Action{Type: ActionNone}
}

// nextPodChange chooses the next change of what the pods run, in both
// modes: a new pod template (or a parameter that needs a restart) is an
// Upgrade, pods left on an older template are restarted, then live
// parameters are a Reconfigure.
func nextPodChange(s Snapshot) Action {
	a := *s.Approved
	if s.StatefulSet == nil || !s.StatefulSet.Settled {
		return Action{Type: ActionWait, Reason: "waiting for the StatefulSet to observe its spec"}
	}

	specKey, approvedKey := renderer.TemplateKey(s.Spec), renderer.TemplateKey(a)
	live, restart := renderer.ConfigChange(a.Config, s.Spec.Config)
	// A change refused before is not tried again until spec changes.
	blocked := s.Blocked != nil && s.Blocked.Target == renderer.ValuesKey(s.Spec)
	if !blocked && (specKey != approvedKey || restart) {
		if refuse, ok := refuseDowngrade(s); ok {
			return refuse
		}
		target := a
		target.Engine, target.Version, target.Image, target.Config, target.Resources = s.Spec.Engine, s.Spec.Version, s.Spec.Image, s.Spec.Config, s.Spec.Resources
		return Action{Type: ActionStartOperation, Reason: describeUpgrade(a, target), Operation: &cachev1alpha1.OperationStatus{
			Type: cachev1alpha1.OperationUpgrade, Step: cachev1alpha1.StepPrecheck, Reason: describeUpgrade(a, target),
			Target: target.DeepCopy(), Previous: a.DeepCopy(), RestartAll: specKey == approvedKey,
		}}
	}
	if s.StatefulSet.TemplateKey == approvedKey {
		for _, p := range s.Pods {
			if !p.Deleting && p.Revision != "" && p.Revision != s.StatefulSet.UpdateRevision {
				return Action{Type: ActionStartOperation, Reason: p.Name + " runs an older pod template", Operation: &cachev1alpha1.OperationStatus{
					Type: cachev1alpha1.OperationUpgrade, Step: cachev1alpha1.StepRestart, Reason: "pods run an older pod template",
					Target: a.DeepCopy(),
				}}
			}
		}
	}
	if len(live) > 0 && !blocked {
		target := a
		target.Config = map[string]cachev1alpha1.ConfigValue{}
		for k, v := range a.Config {
			target.Config[k] = v
		}
		for k, v := range live {
			target.Config[k] = cachev1alpha1.ConfigValue(v)
		}
		return Action{Type: ActionStartOperation, Reason: describeConfig(a.Config, live), Operation: &cachev1alpha1.OperationStatus{
			Type: cachev1alpha1.OperationReconfigure, Reason: describeConfig(a.Config, live), Target: target.DeepCopy(),
		}}
	}
	return Action{Type: ActionNone}
}

// planUpgrade: pre-check, restarts (replicas from the highest ordinal, a
// switchover, the old master last), and a rollback when an upgraded pod
// does not become ready and in sync in time.
func planUpgrade(s Snapshot) Action {
	op := s.Operation
	switch op.Step {
	case cachev1alpha1.StepPrecheck:
		return planPrecheck(s)
	case cachev1alpha1.StepRollback:
		return planRestart(s, *op.Previous, true)
	}
	return planRestart(s, *op.Target, false)
}

// planPrecheck runs an upgrade's pre-check, in both modes: a pod with the
// new template on a copy of the data (seedSource), judged by judgeSeed.
func planPrecheck(s Snapshot) Action {
	op := s.Operation
	key := renderer.TemplateKey(*op.Target)
	pc := s.Precheck
	switch {
	case pc != nil && pc.TemplateKey == key && pc.Failure != "":
		return Action{Type: ActionPrecheckFail, Reason: pc.Failure}
	case pc != nil && pc.TemplateKey == key && pc.Ready:
		if a, decided := judgeSeed(s, pc.Seed, op.Target); decided {
			return a
		}
		if stepExpired(s) {
			return Action{Type: ActionPrecheckFail, Reason: fmt.Sprintf("the keys the pre-check pod loaded could not be counted within %s: %s", s.StepDeadline, pc.Seed.LoadErr)}
		}
		return Action{Type: ActionWait, Reason: "counting the keys the pre-check pod loaded"}
	case stepExpired(s):
		return Action{Type: ActionPrecheckFail, Reason: fmt.Sprintf("the pre-check pod did not become ready within %s", s.StepDeadline)}
	case pc == nil || pc.TemplateKey != key:
		if src, ok := seedSource(s); ok {
			return Action{Type: ActionPrecheckStart, Values: op.Target, Pod: src.Name, Reason: "start a pod with the new template on a copy of " + src.Name + "'s data"}
		}
		return Action{Type: ActionPrecheckStart, Values: op.Target, Reason: "start a pod with the new template"}
	}
	return Action{Type: ActionWait, Reason: "waiting for the pre-check pod"}
}

// planRestart restarts, one at a time, every pod that does not run the
// template of target: replicas from the highest ordinal, then a
// switchover, then the old master. The next pod restarts only when every
// restarted pod is ready and in sync.
func planRestart(s Snapshot, target cachev1alpha1.RolloutValues, rollingBack bool) Action {
	op := s.Operation
	sts := s.StatefulSet
	if sts == nil || !sts.Settled || sts.TemplateKey != renderer.TemplateKey(target) {
		return Action{Type: ActionWait, Reason: "waiting for the StatefulSet to take the approved template"}
	}
	master, ok := s.Pod(s.CurrentMaster)
	if !ok {
		return Action{Type: ActionWait, Reason: "waiting for the master"}
	}
	outdated := func(p PodState) bool {
		if p.Revision != sts.UpdateRevision {
			return true
		}
		return op.RestartAll && !rollingBack && p.Created.Before(op.StartedAt.Time)
	}
	for i := 0; i < int(target.Replicas); i++ {
		name := fmt.Sprintf("%s-%d", s.Name, i)
		p, ok := s.Pod(name)
		var why string
		switch {
		case !ok || p.Deleting:
			why = name + " is being recreated"
		case !outdated(p) && !inSync(p, master):
			why = name + " is not ready and in sync yet"
		}
		if why == "" {
			continue
		}
		if stepExpired(s) {
			if !rollingBack && pastNoReturn(op, outdated(master)) {
				return noReturn(op, name, fmt.Sprintf("%s did not become ready and in sync within %s after its restart on the new template", name, s.StepDeadline))
			}
			if !rollingBack && op.Previous != nil {
				reason := fmt.Sprintf("%s did not become ready and in sync within %s after its restart on the new template (%s)", name, s.StepDeadline, op.Reason)
				next := op.DeepCopy()
				next.Step, next.StepStartedAt, next.Reason = cachev1alpha1.StepRollback, timeRef(s.Now), "rollback: "+reason
				return Action{Type: ActionRollback, Pod: name, Values: op.Previous, Operation: next, Reason: reason}
			}
			why += fmt.Sprintf(" (for more than %s)", s.StepDeadline)
		}
		return Action{Type: ActionWait, Pod: name, Reason: why}
	}
	if a, ok := planDataCheck(s, master, func(p PodState) bool { return !outdated(p) }); ok {
		return a
	}

	pods := SortedPods(s)
	for i := len(pods) - 1; i >= 0; i-- {
		p := pods[i]
		if p.Name != master.Name && !p.Deleting && outdated(p) && p.Ordinal() < int(target.Replicas) {
			return Action{Type: ActionRestartPod, Pod: p.Name, Reason: fmt.Sprintf("%s: replica %d of the rollout", op.Type, p.Ordinal())}
		}
	}
	if outdated(master) {
		if target.Replicas == 1 {
			return Action{Type: ActionRestartPod, Pod: master.Name, Reason: "the only pod: it restarts as master (the cluster is unavailable meanwhile)"}
		}
		cand := bestInSync(s, master, func(p PodState) bool { return !outdated(p) })
		if cand == "" {
			return Action{Type: ActionWait, Reason: "no replica on the new template is in sync to take over"}
		}
		return startSwitchover(s, master.Name, cand, rollingBack, "switchover before the master restarts")
	}
	return rolloutDone(op, rollingBack)
}

// startSwitchover is the operation's next step: the master role moves from
// the master from to the in-sync replica to (a rollback's switchover when
// rollingBack).
func startSwitchover(s Snapshot, from, to string, rollingBack bool, reason string) Action {
	next := s.Operation.DeepCopy()
	next.Step, next.StepStartedAt, next.FromPod, next.ToPod = cachev1alpha1.StepSwitchover, timeRef(s.Now), from, to
	if rollingBack {
		next.Step = StepRollbackSwitchover
	}
	return Action{Type: ActionNextStep, Pod: to, Master: from, Operation: next, Reason: reason}
}

// rolloutDone completes a rolling restart once every pod runs the approved
// template; a rollback keeps the reason it was rolled back for.
func rolloutDone(op *cachev1alpha1.OperationStatus, rollingBack bool) Action {
	done := &cachev1alpha1.OperationStatus{}
	if rollingBack {
		done.Reason = op.Reason
	}
	return Action{Type: ActionCompleteOperation, Operation: done, Reason: "every pod runs the approved template"}
}

// planSwitchover moves the master role from op.FromPod to op.ToPod while
// both answer: traffic off the master, Redis FAILOVER (writes paused until
// the target caught up), traffic to the new master.
func planSwitchover(s Snapshot) Action {
	op := s.Operation
	from, fok := s.Pod(op.FromPod)
	to, tok := s.Pod(op.ToPod)
	if tok && Healthy(to) && to.Obs.Role == "master" {
		if fok && from.RoleLabel == cachev1alpha1.RoleMaster {
			return Action{Type: ActionUnlabel, Pod: from.Name, Reason: "switchover: only the new master may carry the label"}
		}
		// Record the new master before it gets traffic: from here on the
		// topology rules (label, repoint, failover if it dies) apply to it.
		return Action{Type: ActionEndSwitchover, Pod: to.Name, Master: from.Name, Operation: afterSwitchover(op, s.Now), Reason: "switchover done"}
	}
	abort := func(why string) Action {
		reason := fmt.Sprintf("switchover to %s aborted: %s", op.ToPod, why)
		if op.Type == cachev1alpha1.OperationUpgrade && op.Step == cachev1alpha1.StepSwitchover && op.Previous != nil {
			// The master cannot be handed over: the upgrade cannot finish;
			// return the upgraded replicas to the previous template.
			next := op.DeepCopy()
			next.Step, next.StepStartedAt, next.FromPod, next.ToPod, next.Reason = cachev1alpha1.StepRollback, timeRef(s.Now), "", "", "rollback: "+reason
			return Action{Type: ActionEndSwitchover, Master: op.FromPod, Operation: next, Values: op.Previous, Reason: reason}
		}
		return Action{Type: ActionEndSwitchover, Master: op.FromPod, Operation: afterSwitchover(op, s.Now), Reason: reason}
	}
	if stepExpired(s) {
		return abort(fmt.Sprintf("not done within %s", s.StepDeadline))
	}
	switch {
	case !tok || !Healthy(to):
		return Action{Type: ActionWait, Pod: op.ToPod, Reason: "switchover: waiting for the target to answer"}
	case !fok || !Healthy(from) || from.Obs.Role != "master":
		return Action{Type: ActionWait, Pod: op.FromPod, Reason: "switchover: waiting for the master"}
	case from.Obs.FailoverState != "" && from.Obs.FailoverState != "no-failover":
		return Action{Type: ActionWait, Pod: op.FromPod, Reason: "switchover: Redis FAILOVER in progress (" + from.Obs.FailoverState + ")"}
	case !s.SwitchoverIssuedAt.IsZero() && s.Now.Sub(s.SwitchoverIssuedAt) > s.ProbeTimeout+time.Second:
		// FAILOVER was sent and is over, yet the roles did not change:
		// Redis gave up (the target did not catch up in time). Give the
		// master its traffic back now rather than retrying without it.
		return abort("Redis FAILOVER did not complete (the target did not catch up in time)")
	case to.Obs.MasterHost != from.IP || !to.Obs.MasterLinkUp:
		return Action{Type: ActionWait, Pod: op.ToPod, Reason: "switchover: waiting for the target to follow the master"}
	case from.RoleLabel == cachev1alpha1.RoleMaster:
		return Action{Type: ActionUnlabel, Pod: from.Name, Reason: "switchover: stop traffic to the old master"}
	}
	if !s.SwitchoverIssuedAt.IsZero() {
		return Action{Type: ActionWait, Pod: op.FromPod, Reason: "switchover: waiting for Redis FAILOVER to start"}
	}
	return Action{Type: ActionGracefulSwitchover, Pod: to.Name, Master: from.Name, Reason: "switchover"}
}

// afterSwitchover is the operation once the switchover ended: a requested
// switchover is over; an upgrade goes back to its restarts; a scale-down
// removes pods. An aborted one is planned again from there.
func afterSwitchover(op *cachev1alpha1.OperationStatus, now time.Time) *cachev1alpha1.OperationStatus {
	if op.Type == cachev1alpha1.OperationSwitchover {
		return nil
	}
	next := op.DeepCopy()
	next.FromPod, next.ToPod, next.StepStartedAt = "", "", timeRef(now)
	switch {
	case op.Step == StepRollbackSwitchover:
		next.Step = cachev1alpha1.StepRollback
	case op.Type == cachev1alpha1.OperationScaling:
		next.Step = ""
	default:
		next.Step = cachev1alpha1.StepRestart
	}
	return next
}

// planScaling: a scale-down first moves the master off the ordinals that
// go; the count changes only then. Done when every pod that should exist
// is ready and in sync and the others are gone.
func planScaling(s Snapshot) Action {
	op := s.Operation
	want := op.Target.Replicas
	master, _ := s.Pod(s.CurrentMaster)
	if s.Approved.Replicas != want {
		if want < s.Approved.Replicas && master.Ordinal() >= int(want) {
			cand := bestInSync(s, master, func(p PodState) bool { return p.Ordinal() < int(want) })
			if cand == "" {
				return Action{Type: ActionWait, Reason: fmt.Sprintf("scale-down: no replica below ordinal %d is in sync to take over from %s", want, master.Name)}
			}
			return startSwitchover(s, master.Name, cand, false, fmt.Sprintf("scale-down: the master %s is on an ordinal that goes", master.Name))
		}
		v := *s.Approved
		v.Replicas = want
		return Action{Type: ActionApprove, Values: &v, Reason: fmt.Sprintf("replicas %d→%d", s.Approved.Replicas, want)}
	}
	if sts := s.StatefulSet; sts == nil || !sts.Settled || sts.Replicas != want {
		return Action{Type: ActionWait, Reason: "waiting for the StatefulSet to take the new count"}
	}
	for _, p := range s.Pods {
		if p.Ordinal() >= int(want) {
			return Action{Type: ActionWait, Pod: p.Name, Reason: "waiting for " + p.Name + " to go"}
		}
	}
	for i := 0; i < int(want); i++ {
		name := fmt.Sprintf("%s-%d", s.Name, i)
		if p, ok := s.Pod(name); !ok || !inSync(p, master) {
			return Action{Type: ActionWait, Pod: name, Reason: "waiting for " + name + " to be ready and in sync"}
		}
	}
	return Action{Type: ActionCompleteOperation, Reason: fmt.Sprintf("%d pods ready and in sync", want)}
}

// planReconfigure sets the changed parameters on every pod at once, then
// approves them (the ConfigMap follows, for pods that start later).
func planReconfigure(s Snapshot) Action {
	op := s.Operation
	live, _ := renderer.ConfigChange(s.Approved.Config, op.Target.Config)
	if len(live) == 0 {
		return Action{Type: ActionCompleteOperation, Values: op.Target, Reason: "nothing left to set"}
	}
	for _, p := range s.Pods {
		if !Healthy(p) {
			return Action{Type: ActionWait, Pod: p.Name, Reason: "waiting for " + p.Name + " to answer before changing parameters"}
		}
	}
	return Action{Type: ActionApplyConfig, Config: live, Values: op.Target, Reason: describeConfig(s.Approved.Config, live)}
}

// inSync: the pod serves what the master has: ready, following the master
// with its link up and, when the master holds data, holding data too.
func inSync(p, master PodState) bool {
	if !Healthy(p) || !p.Ready {
		return false
	}
	if p.Name == master.Name {
		return p.Obs.Role == "master"
	}
	return p.Obs.Role == "slave" && p.Obs.MasterHost == master.IP && p.Obs.MasterLinkUp &&
		(master.Obs.Keys == 0 || p.Obs.Keys > 0)
}

// bestInSync is the in-sync replica that may take over (ok), with the
// highest offset, then the lowest ordinal.
func bestInSync(s Snapshot, master PodState, ok func(PodState) bool) string {
	var cands []PodState
	for _, p := range s.Pods {
		if p.Name != master.Name && !p.Deleting && ok(p) && inSync(p, master) {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return ""
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].Obs.Offset != cands[j].Obs.Offset {
			return cands[i].Obs.Offset > cands[j].Obs.Offset
		}
		return cands[i].Ordinal() < cands[j].Ordinal()
	})
	return cands[0].Name
}

func stepExpired(s Snapshot) bool {
	op := s.Operation
	return op != nil && op.StepStartedAt != nil && s.StepDeadline > 0 && s.Now.Sub(op.StepStartedAt.Time) > s.StepDeadline
}

func timeRef(t time.Time) *metav1.Time {
	m := metav1.NewTime(t)
	return &m
}

// describeUpgrade says what a template change is, for people.
func describeUpgrade(from, to cachev1alpha1.RolloutValues) string {
	var parts []string
	switch {
	case cachev1alpha1.EngineOrDefault(from.Engine) != cachev1alpha1.EngineOrDefault(to.Engine):
		parts = append(parts, fmt.Sprintf("engine %s→%s", engineName(from), engineName(to)))
	case from.Version != to.Version:
		parts = append(parts, fmt.Sprintf("version %s→%s", from.Version, to.Version))
	}
	if renderer.ImageOf(from) != renderer.ImageOf(to) && (from.Image != "" || to.Image != "") {
		parts = append(parts, fmt.Sprintf("image %s→%s", renderer.ImageOf(from), renderer.ImageOf(to)))
	}
	if _, restart := renderer.ConfigChange(from.Config, to.Config); restart {
		parts = append(parts, "parameters that need a restart")
	}
	if renderer.TemplateKey(cachev1alpha1.RolloutValues{Resources: from.Resources}) != renderer.TemplateKey(cachev1alpha1.RolloutValues{Resources: to.Resources}) {
		parts = append(parts, "resources")
	}
	if len(parts) == 0 {
		parts = append(parts, "pod template")
	}
	return strings.Join(parts, ", ") + ": rolling restart" + describeNoReturn(from, to)
}

// describeConfig lists live parameter changes.
func describeConfig(from map[string]cachev1alpha1.ConfigValue, live map[string]string) string {
	keys := make([]string, 0, len(live))
	for k := range live {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if old, ok := from[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %s→%s", k, old, live[k]))
		} else {
			parts = append(parts, fmt.Sprintf("%s %s", k, live[k]))
		}
	}
	return strings.Join(parts, ", ") + ": applied live, no restart"
}

// Queued says which spec changes wait for the operation in progress; empty
// when nothing waits.
func Queued(s Snapshot) string {
	op := s.Operation
	if op == nil || s.Approved == nil {
		return ""
	}
	base := *s.Approved
	if op.Target != nil {
		base = *op.Target
	}
	var waiting []string
	switch {
	case s.Spec.Replicas == base.Replicas:
	case s.Sharded != nil && op.Type != cachev1alpha1.OperationScaling:
		pps := int32(max(s.Sharded.PodsPerShard, 1))
		waiting = append(waiting, fmt.Sprintf("shards %d→%d", base.Replicas/pps, s.Spec.Replicas/pps))
	case s.Sharded == nil:
		waiting = append(waiting, fmt.Sprintf("replicas %d→%d", base.Replicas, s.Spec.Replicas))
	}
	if s.Blocked != nil && s.Blocked.Target == renderer.ValuesKey(s.Spec) {
		// Refused: it does not wait, it is reported as Stalled.
	} else if renderer.TemplateKey(s.Spec) != renderer.TemplateKey(base) {
		waiting = append(waiting, describeUpgrade(base, s.Spec))
	} else if live, _ := renderer.ConfigChange(base.Config, s.Spec.Config); len(live) > 0 {
		waiting = append(waiting, describeConfig(base.Config, live))
	}
	if s.PendingBackup != "" && op.Type != cachev1alpha1.OperationBackup {
		waiting = append(waiting, "backup "+s.PendingBackup)
	}
	if len(waiting) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: waits for %s %s to finish", strings.Join(waiting, "; "), op.Type, op.ID)
}
