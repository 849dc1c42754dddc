package plan

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// ActionType names the one step the executor takes next.
type ActionType string

// The steps of day-two replication management. Each is idempotent: doing it
// twice leaves the same state.
const (
	// ActionNone: the topology is as it should be.
	ActionNone ActionType = "None"
	// ActionWait: something must happen first (a pod to answer, a timeout
	// to pass); Reason says what.
	ActionWait ActionType = "Wait"
	// ActionBootstrap records the first master in the status.
	ActionBootstrap ActionType = "Bootstrap"
	// ActionStartFailover records the failover (from, to) in the status
	// before any step of it is taken.
	ActionStartFailover ActionType = "StartFailover"
	// ActionUnlabel takes the master label off a pod so the Service stops
	// sending it traffic.
	ActionUnlabel ActionType = "Unlabel"
	// ActionPromote makes a pod master (REPLICAOF NO ONE).
	ActionPromote ActionType = "Promote"
	// ActionLabelMaster labels the master so the Service selects it.
	ActionLabelMaster ActionType = "LabelMaster"
	// ActionLabelReplica labels a replica.
	ActionLabelReplica ActionType = "LabelReplica"
	// ActionRepoint makes a replica follow the master (REPLICAOF master).
	ActionRepoint ActionType = "Repoint"
	// ActionFence makes a pod that believes it is master a replica of the
	// real master, before it gets any traffic.
	ActionFence ActionType = "Fence"
	// ActionCompleteFailover records the new master and ends the operation.
	ActionCompleteFailover ActionType = "CompleteFailover"
	// ActionRefresh probes Pods again now: the next decision needs what
	// they answer after a moment the snapshot's observations predate.
	ActionRefresh ActionType = "Refresh"
	// ActionRecreate deletes a pod that stayed not-Ready too long; its
	// StatefulSet makes a new one on the same volume (and so in the same
	// zone, which the volume's node affinity enforces).
	ActionRecreate ActionType = "Recreate"
)

// Action is the planner's decision.
type Action struct {
	Type ActionType
	// Pod the action is about.
	Pod string
	// Master is the pod Pod must follow (Repoint, Fence) or the failed
	// master (StartFailover).
	Master string
	Reason string
	// Values are what Approve, StartOperation and Rollback approve.
	Values *cachev1alpha1.RolloutValues
	// Operation is what StartOperation records, or the operation's next
	// state (NextStep, CompleteOperation).
	Operation *cachev1alpha1.OperationStatus
	// Config holds the parameters ApplyConfig sets live.
	Config map[string]string
	// Pods are the pods Refresh probes.
	Pods []string
}

func (a Action) String() string {
	s := string(a.Type)
	if a.Pod != "" {
		s += " " + a.Pod
	}
	if len(a.Pods) > 0 {
		s += " " + strings.Join(a.Pods, ",")
	}
	if a.Master != "" {
		s += " (master " + a.Master + ")"
	}
	if a.Reason != "" {
		s += ": " + a.Reason
	}
	return s
}

// PodState is one pod as the planner sees it: from the API server and from
// the last probe of its Redis.
type PodState struct {
	Name      string
	UID       types.UID
	IP        string
	RoleLabel string
	Deleting  bool
	// Observed is false until the prober has looked at the pod once.
	Observed bool
	Obs      probe.Observation
	// NotReadySince is when the pod's Ready condition turned False; zero
	// while it is Ready or has not started.
	NotReadySince time.Time
	// Ready is the pod's Ready condition.
	Ready bool
	// Revision is the StatefulSet revision the pod was made from.
	Revision string
	// Created is the pod's creation time.
	Created time.Time
}

// Ordinal is the StatefulSet ordinal of the pod (name-N).
func (p PodState) Ordinal() int {
	i := strings.LastIndexByte(p.Name, '-')
	n, err := strconv.Atoi(p.Name[i+1:])
	if err != nil {
		return 1 << 30
	}
	return n
}

// Snapshot is everything the planner decides on. Plan is a pure function of
// it, so a decision can be tested, logged and replayed.
type Snapshot struct {
	// Name of the CacheCluster; pods are Name-0, Name-1, ...
	Name         string
	Now          time.Time
	ProbeTimeout time.Duration
	AutoFailover bool
	// CurrentMaster and Operation come from the CacheCluster status.
	CurrentMaster string
	Operation     *cachev1alpha1.OperationStatus
	Pods          []PodState
	// RecreateAfter is how long a pod may stay not-Ready before it is
	// recreated; zero turns recreation off.
	RecreateAfter time.Duration

	// Spec is what spec asks the pods to run; Approved is what day-two
	// approved (status.rollout), nil until the first approval.
	Spec     cachev1alpha1.RolloutValues
	Approved *cachev1alpha1.RolloutValues
	Blocked  *cachev1alpha1.RolloutBlock
	// StatefulSet is the StatefulSet as last observed; nil if absent.
	StatefulSet *StatefulSetState
	// Precheck is the temporary pod of an upgrade pre-check; nil if absent.
	Precheck *PrecheckState
	// SwitchoverTo is a requested switchover (annotation), empty if none.
	SwitchoverTo string
	// StepDeadline bounds a pre-check and how long an upgraded pod may
	// take to become ready and in sync.
	StepDeadline time.Duration
	// SwitchoverIssuedAt is when Redis FAILOVER was last sent for the
	// switchover in progress; zero if not (or not since a restart).
	SwitchoverIssuedAt time.Time
	// RestorePending: the cluster was created from a backup whose restore
	// has not been checked yet.
	RestorePending bool
	// Backup is the CacheBackup of the Backup operation in progress.
	Backup *BackupState
	// PendingBackup is the oldest CacheBackup waiting for its turn.
	PendingBackup string

	// AutoRestore is spec.backup.autoRestore.
	AutoRestore bool
	// DataLost: the DataLost condition is True; RestoreFailed: because a
	// recovery's restore failed its check (no second automatic attempt).
	DataLost, RestoreFailed bool
	// AcceptDataLoss: the annotation accepting a data loss is set.
	AcceptDataLoss bool
	// LatestBackup is the newest completed CacheBackup of the cluster; nil
	// when there is none.
	LatestBackup *RestorePoint
	// RestoreConfig is the restore ConfigMap; nil when absent.
	RestoreConfig *RestoreConfig
}

// StatefulSetState is what the planner needs of the StatefulSet.
type StatefulSetState struct {
	// Settled: the controller observed the latest spec.
	Settled bool
	// TemplateKey identifies the pod template (renderer.TemplateKey).
	TemplateKey    string
	Replicas       int32
	UpdateRevision string
	// RestoreInit: the pod template has the restore init container.
	RestoreInit bool
}

// PrecheckState is the pre-check pod as last observed.
type PrecheckState struct {
	// TemplateKey is the template the pod was made from.
	TemplateKey string
	Ready       bool
	// Failure says why the pod cannot start; empty while it may still.
	Failure string
}

func (s Snapshot) Pod(name string) (PodState, bool) {
	for _, p := range s.Pods {
		if p.Name == name {
			return p, true
		}
	}
	return PodState{}, false
}

// down tells whether a pod has been unreachable for longer than the probe
// timeout (or is gone).
func (s Snapshot) down(name string) bool {
	p, ok := s.Pod(name)
	if !ok || p.Deleting {
		return true
	}
	if !p.Observed {
		return false
	}
	if p.Obs.Reachable {
		return false
	}
	return p.Obs.LastSeen.IsZero() || s.Now.Sub(p.Obs.LastSeen) > s.ProbeTimeout
}

func Healthy(p PodState) bool {
	return p.Observed && p.Obs.Reachable && !p.Obs.Loading && !p.Deleting
}

// Next returns the next step towards: one master, recorded in the status
// and labelled; every other reachable pod a replica of it, labelled replica;
// a failed master replaced by the replica holding the most data.
func Next(s Snapshot) Action {
	if s.Operation != nil && s.Operation.Type == cachev1alpha1.OperationRestore {
		return planRestore(s)
	}
	if s.Operation != nil && s.Operation.Type == cachev1alpha1.OperationFailover {
		return planFailover(s)
	}
	if a := planDataLoss(s); a.Type != ActionNone {
		return a
	}
	if s.CurrentMaster == "" {
		return planBootstrap(s)
	}
	if s.Approved == nil {
		return Action{Type: ActionApprove, Values: &s.Spec, Reason: "first approval of spec"}
	}

	master, exists := s.Pod(s.CurrentMaster)
	if !exists || s.down(s.CurrentMaster) {
		if !s.AutoFailover {
			return Action{Type: ActionWait, Pod: s.CurrentMaster, Reason: "master is down and automatic failover is off"}
		}
		cand, why := chooseCandidate(s, s.CurrentMaster)
		if cand == "" {
			return Action{Type: ActionWait, Pod: s.CurrentMaster, Reason: "master is down and no replica can take over: " + why}
		}
		return Action{Type: ActionStartFailover, Pod: cand, Master: s.CurrentMaster, Reason: fmt.Sprintf("master %s unreachable for more than %s", s.CurrentMaster, s.ProbeTimeout)}
	}
	// A switchover in progress owns the roles until it ends.
	if InSwitchover(s.Operation) {
		return planSwitchover(s)
	}
	// A pod stuck not-Ready (a wedged process, a lost volume mount) is
	// recreated; the master only after a failover moved the role away.
	// During an upgrade the upgrade's deadline judges the pods instead.
	if s.RecreateAfter > 0 && (s.Operation == nil || s.Operation.Type != cachev1alpha1.OperationUpgrade) {
		for _, p := range SortedPods(s) {
			if p.Name != master.Name && !p.Deleting && !p.NotReadySince.IsZero() && s.Now.Sub(p.NotReadySince) > s.RecreateAfter {
				return Action{Type: ActionRecreate, Pod: p.Name, Reason: fmt.Sprintf("not Ready for more than %s", s.RecreateAfter)}
			}
		}
	}
	if !Healthy(master) {
		return Action{Type: ActionWait, Pod: master.Name, Reason: "waiting for the master to answer"}
	}

	// A master that restarted empty must not wipe replicas that kept the
	// data: fail over to them instead.
	if master.Obs.Role == "master" && master.Obs.Keys == 0 {
		for _, p := range s.Pods {
			if p.Name != master.Name && Healthy(p) && p.Obs.Keys > 0 && !(p.Obs.Role == "slave" && p.Obs.MasterHost == master.IP && p.Obs.MasterLinkUp) {
				if s.AutoFailover {
					return Action{Type: ActionStartFailover, Pod: bestOf(s, master.Name), Master: master.Name, Reason: fmt.Sprintf("master %s came back empty while replicas hold data", master.Name)}
				}
				return Action{Type: ActionWait, Pod: master.Name, Reason: "master came back empty while replicas hold data; automatic failover is off"}
			}
		}
	}

	// A master that restarted in place must never become the source of a
	// replica that holds writes it lacks: resynchronising from it, the
	// replica would drop them. Fail over to the replica with the most
	// history instead.
	if master.Obs.Role == "master" {
		for _, p := range SortedPods(s) {
			if why := lacksHistory(master, p); why != "" {
				if s.AutoFailover {
					return Action{Type: ActionStartFailover, Pod: bestOf(s, master.Name), Master: master.Name, Reason: fmt.Sprintf("master %s restarted with less history than %s: %s", master.Name, p.Name, why)}
				}
				return Action{Type: ActionWait, Pod: master.Name, Reason: fmt.Sprintf("master %s restarted with less history than %s (%s); automatic failover is off", master.Name, p.Name, why)}
			}
		}
	}

	// Never two master labels: take it off every other pod first, before
	// anything is promoted.
	for _, p := range s.Pods {
		if p.Name != master.Name && p.RoleLabel == cachev1alpha1.RoleMaster {
			return Action{Type: ActionUnlabel, Pod: p.Name, Reason: "only " + master.Name + " may carry the master label"}
		}
	}
	// The designated master must be a master in Redis too.
	if master.Obs.Role != "master" {
		return Action{Type: ActionPromote, Pod: master.Name, Reason: "the recorded master is a replica in Redis"}
	}
	// A restored cluster is checked before any client can write to it:
	// the master label, which the Service selects, comes after.
	if s.RestorePending {
		return Action{Type: ActionVerifyRestore, Pod: master.Name, Reason: "compare the restored keys with the backup's metadata"}
	}
	if a := converge(s, master); a.Type != ActionNone {
		return a
	}
	return planOperations(s)
}

// converge labels the master, and makes every other reachable pod a
// labelled replica of it.
func converge(s Snapshot, master PodState) Action {
	if master.RoleLabel != cachev1alpha1.RoleMaster {
		return Action{Type: ActionLabelMaster, Pod: master.Name}
	}
	for _, p := range SortedPods(s) {
		if p.Name == master.Name || !Healthy(p) {
			continue
		}
		switch {
		case p.Obs.Role == "master":
			return Action{Type: ActionFence, Pod: p.Name, Master: master.Name, Reason: p.Name + " believes it is master"}
		case p.Obs.MasterHost != master.IP:
			return Action{Type: ActionRepoint, Pod: p.Name, Master: master.Name, Reason: fmt.Sprintf("follows %q instead of %s", p.Obs.MasterHost, master.IP)}
		case p.RoleLabel != cachev1alpha1.RoleReplica && p.Obs.MasterLinkUp:
			return Action{Type: ActionLabelReplica, Pod: p.Name}
		}
	}
	return Action{Type: ActionNone}
}

// lacksHistory says why the master m lacks writes that the replica p,
// not in sync with it, holds; "" when it does not (or cannot be told).
//   - Same history (replication ID), p further along: m restarted from a
//     shorter copy of its own history.
//   - Unrelated histories (p's ID is neither m's nor the one m continued
//     from), p following m and holding data, and m's run younger than p's
//     lost link: m restarted in place with a new history after p last
//     heard from it. m cannot prove it holds p's writes, and a full
//     resynchronisation from m would replace them.
//
// A replica whose history m continued (m's second ID) but went further
// is not counted: that is an old master fenced after a failover, whose
// extra writes no replica acknowledged.
func lacksHistory(m, p PodState) string {
	if p.Name == m.Name || !Healthy(p) || p.Obs.Role != "slave" || p.Obs.MasterLinkUp || m.Obs.ReplID == "" || p.Obs.ReplID == "" {
		return ""
	}
	switch {
	case p.Obs.ReplID == m.Obs.ReplID:
		if p.Obs.Offset > m.Obs.Offset {
			return fmt.Sprintf("offset %d > %d on the same replication ID", p.Obs.Offset, m.Obs.Offset)
		}
	case p.Obs.ReplID == m.Obs.ReplID2:
	case p.Obs.MasterHost == m.IP && (p.Obs.Keys > 0 || p.Obs.Offset > 0) && p.Obs.LinkDownSeconds >= 0 && m.Obs.UptimeSeconds <= p.Obs.LinkDownSeconds:
		return fmt.Sprintf("its run is %d s old, a new replication ID, while %s lost its link %d s ago holding offset %d", m.Obs.UptimeSeconds, p.Name, p.Obs.LinkDownSeconds, p.Obs.Offset)
	}
	return ""
}

// planBootstrap chooses the first master: the reachable pod with the most
// data (so a cluster whose status was lost never promotes an empty pod over
// a full one), then the lowest ordinal.
func planBootstrap(s Snapshot) Action {
	var ready []PodState
	for _, p := range s.Pods {
		if Healthy(p) {
			ready = append(ready, p)
		}
	}
	if len(ready) == 0 {
		return Action{Type: ActionWait, Reason: "no pod answers yet"}
	}
	sort.Slice(ready, func(i, j int) bool {
		a, b := ready[i], ready[j]
		if a.Obs.Keys != b.Obs.Keys {
			return a.Obs.Keys > b.Obs.Keys
		}
		return a.Ordinal() < b.Ordinal()
	})
	return Action{Type: ActionBootstrap, Pod: ready[0].Name, Reason: "first master"}
}

// planFailover continues a recorded failover, one step at a time, in an
// order after which no pod but the target can acknowledge a write (a WAIT
// needs a master with a replica attached):
//
//  1. the old master loses its label: the Service stops sending it
//     traffic;
//  2. detach: every other reachable replica follows the target (REPLICAOF
//     target) while the target still replicates the old master, so an old
//     master that comes back has no replica but the target, and every
//     write it gets acknowledged is on the target. A replica that holds
//     more of the stream than the target becomes the target instead
//     (only while the old master does not answer: then the offsets stand
//     still);
//  3. promote the target (REPLICAOF NO ONE): the old master is left with
//     no replica at all;
//  4. fence every other pod that believes it is master (the old master
//     when it answers): it follows the target and its client connections
//     are dropped;
//  5. label the target;
//  6. repoint the pods that follow anything else (pods that came back);
//  7. record the new master, end the operation.
//
// Every step is planned from what the pods report, so a step taken twice
// (an operator restarted after acting, before seeing the effect) changes
// nothing.
func planFailover(s Snapshot) Action {
	op := s.Operation
	from, to := op.FromPod, op.ToPod
	target, ok := s.Pod(to)
	if !ok || s.down(to) {
		// The chosen pod died too: choose again, still away from the old master.
		cand, why := chooseCandidate(s, from, to)
		if cand == "" {
			return Action{Type: ActionWait, Pod: to, Reason: "failover target is down and no other replica can take over: " + why}
		}
		return Action{Type: ActionStartFailover, Pod: cand, Master: from, Reason: "failover target " + to + " is down"}
	}
	// 1. No traffic to the old master through the Service.
	if old, ok := s.Pod(from); ok && old.RoleLabel == cachev1alpha1.RoleMaster {
		return Action{Type: ActionUnlabel, Pod: from, Reason: "failover: stop traffic to the old master"}
	}
	for _, p := range s.Pods {
		if p.Name != to && p.RoleLabel == cachev1alpha1.RoleMaster {
			return Action{Type: ActionUnlabel, Pod: p.Name, Reason: "failover: only the new master may carry the label"}
		}
	}
	if !Healthy(target) {
		return Action{Type: ActionWait, Pod: to, Reason: "waiting for the failover target to answer"}
	}
	if target.Obs.Role != "master" {
		// 2. Detach the other replicas: they follow the target.
		old, _ := s.Pod(from)
		if !Healthy(old) {
			if stale := probedBefore(s, op.StartedAt.Time, from, target); len(stale) > 0 {
				return Action{Type: ActionRefresh, Pods: stale, Reason: "failover: read the offsets again before choosing whom to detach and promote"}
			}
			for _, p := range SortedPods(s) {
				if detachable(s, p, from, target) && MoreHistory(p, target) {
					return Action{Type: ActionStartFailover, Pod: p.Name, Master: from, Reason: fmt.Sprintf("failover: %s holds more of the stream than %s", p.Name, to)}
				}
			}
		}
		for _, p := range SortedPods(s) {
			if detachable(s, p, from, target) {
				return Action{Type: ActionRepoint, Pod: p.Name, Master: to, Reason: "failover: detach from the old master before the promotion"}
			}
		}
		// 3. Promote.
		return Action{Type: ActionPromote, Pod: to, Reason: "failover from " + from}
	}
	// 4. Fence whoever else believes it is master, first of all the old
	// master as soon as it answers.
	for _, p := range SortedPods(s) {
		if p.Name != to && Healthy(p) && p.Obs.Role == "master" {
			return Action{Type: ActionFence, Pod: p.Name, Master: to, Reason: "failover: " + p.Name + " still believes it is master"}
		}
	}
	// 5. Traffic to the new master.
	if target.RoleLabel != cachev1alpha1.RoleMaster {
		return Action{Type: ActionLabelMaster, Pod: to, Reason: "failover from " + from}
	}
	// 6. The other reachable pods follow it.
	for _, p := range SortedPods(s) {
		if p.Name != to && Healthy(p) && p.Obs.MasterHost != target.IP {
			return Action{Type: ActionRepoint, Pod: p.Name, Master: to, Reason: "failover: follow the new master"}
		}
	}
	return Action{Type: ActionCompleteFailover, Pod: to, Master: from}
}

// probedBefore lists the target and the replicas still to detach whose
// last probe is no later than the failover's start (recorded to the
// second). With the old master silent their offsets stand still, so one
// look after the start shows what each holds; deciding on an older look,
// a replica that received more of the stream than the target would be
// detached (and resynchronised in full from a target that lacks it).
func probedBefore(s Snapshot, start time.Time, from string, target PodState) []string {
	var stale []string
	for _, p := range SortedPods(s) {
		if (p.Name == target.Name || detachable(s, p, from, target)) && !p.Obs.ProbedAt.After(start) {
			stale = append(stale, p.Name)
		}
	}
	return stale
}

// detachable: before the promotion, p is a reachable replica, neither the
// old master nor the target, that does not follow the target yet.
func detachable(s Snapshot, p PodState, from string, target PodState) bool {
	return p.Name != from && p.Name != target.Name && Healthy(p) && p.Obs.Role == "slave" && p.Obs.MasterHost != target.IP
}

// moreHistory tells whether p holds more of the replication stream than t
// (data over no data, then the higher offset): following t, it would
// resynchronise in full and lose what t lacks.
func MoreHistory(p, t PodState) bool {
	if (p.Obs.Keys > 0) != (t.Obs.Keys > 0) {
		return p.Obs.Keys > 0
	}
	return p.Obs.Offset > t.Obs.Offset
}

// chooseCandidate picks the replica to promote: reachable, not loading,
// not excluded; the highest replication offset; never an empty dataset
// while another candidate has data; ties to the lowest ordinal.
func chooseCandidate(s Snapshot, exclude ...string) (string, string) {
	skip := map[string]bool{}
	for _, e := range exclude {
		skip[e] = true
	}
	var cands []PodState
	anyData := false
	for _, p := range s.Pods {
		if skip[p.Name] || !Healthy(p) {
			continue
		}
		cands = append(cands, p)
		if p.Obs.Keys > 0 {
			anyData = true
		}
	}
	if len(cands) == 0 {
		return "", "no reachable replica"
	}
	if anyData {
		withData := cands[:0]
		for _, p := range cands {
			if p.Obs.Keys > 0 {
				withData = append(withData, p)
			}
		}
		cands = withData
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.Obs.Offset != b.Obs.Offset {
			return a.Obs.Offset > b.Obs.Offset
		}
		return a.Ordinal() < b.Ordinal()
	})
	return cands[0].Name, ""
}

func bestOf(s Snapshot, exclude string) string {
	c, _ := chooseCandidate(s, exclude)
	return c
}

func SortedPods(s Snapshot) []PodState {
	pods := append([]PodState(nil), s.Pods...)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Ordinal() < pods[j].Ordinal() })
	return pods
}
