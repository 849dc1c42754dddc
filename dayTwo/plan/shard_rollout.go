package plan

import (
	"fmt"
	"strings"
	"time"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
	"github.com/cacheops/cacheops/renderer"
)

// A rolling restart of a sharded cluster (an upgrade, a parameter that
// needs a restart, new resources): what replication mode does for its one
// master, done per shard, one pod at a time over the whole cluster.
//
//  1. The pre-check copies the data of one shard (the in-sync replica
//     holding the most keys) into a pod of the new template, which starts
//     in cluster mode on its own empty node file and must hold the copy's
//     keys.
//  2. Every replica of every shard restarts first, from the highest
//     ordinal, each followed by the data check against its shard's master:
//     while no master runs the new template, a failed pod still rolls the
//     whole cluster back.
//  3. Shard by shard (lowest index first): CLUSTER FAILOVER on an
//     upgraded, in-sync replica of the shard (the coordinated form: the
//     master pauses its clients until the replica holds its whole stream,
//     then the replica takes the slots), confirmed when the replica's own
//     CLUSTER NODES line says it serves the slots and the old master's says
//     it follows it; then, SwitchoverSettle later, the old master (now a
//     replica) restarts and is checked.
//
// One pod at a time: the PodDisruptionBudget allows one pod of the cluster
// unavailable (maxUnavailable 1), so a node drain during the rollout never
// takes a second one, and the one-step-per-reconcile executor needs no
// bookkeeping of restarts in flight. Every decision is read from the pods
// (revision, CLUSTER NODES, INFO replication), so an operator restarted at
// any step continues.

// Steps of a sharded rollout (shard_rollout.go).
const (
	// ActionShardFailover runs CLUSTER FAILOVER on Pod, an upgraded
	// in-sync replica of Master (its shard's master): Redis pauses the
	// master's clients until the replica has the whole replication
	// stream, then the replica takes the shard's slots.
	ActionShardFailover ActionType = "ShardFailover"
	// ActionEndShardSwitchover records a shard's switchover as done (Pod
	// serves the shard now, Master was its master) or aborted (Pod empty),
	// and the operation's next step (Operation); Values, when set, are
	// approved (an aborted switchover rolls the upgrade back).
	ActionEndShardSwitchover ActionType = "EndShardSwitchover"
)

// SwitchoverSettle is how long a shard's old master keeps running after
// its switchover before it restarts. Cluster clients learn a slot's new
// owner from the MOVED the old master answers for it; restarted at once,
// it would answer a client that still sends it the shard's keys with a
// refused or hanging connection instead (measured in
// TestShardedRollingUpgradeUnderWrites: a 2.0 s write pause after the
// last switchover without it).
const SwitchoverSettle = 2 * time.Second

// ShardFailoverTimeout is how long Redis gives a CLUSTER FAILOVER
// (CLUSTER_MF_TIMEOUT, the same in Valkey 8.0): if the replica has not
// taken over by then, Redis gives up and the master serves its clients
// again.
const ShardFailoverTimeout = 5 * time.Second

// planShardedOperation continues an operation other than resharding on a
// sharded cluster, or starts the next change of what its pods run.
func planShardedOperation(v shardedView) Action {
	s := v.s
	op := s.Operation
	if op == nil {
		if a := nextPodChange(s); a.Type != ActionNone {
			return a
		}
		return nextClusterParameters(v)
	}
	switch op.Type {
	case cachev1alpha1.OperationUpgrade:
		switch op.Step {
		case cachev1alpha1.StepPrecheck:
			return planPrecheck(s)
		case cachev1alpha1.StepSwitchover, StepRollbackSwitchover:
			return planShardSwitchover(v)
		case cachev1alpha1.StepRollback:
			return planShardRestart(v, *op.Previous, true)
		}
		return planShardRestart(v, *op.Target, false)
	case cachev1alpha1.OperationReconfigure:
		return planShardedReconfigure(v)
	}
	return Action{Type: ActionWait, Reason: fmt.Sprintf("operation %s of type %s is not run for a sharded cluster", op.ID, op.Type)}
}

// servesSlots: the node's own line says it is a master with slots.
func servesSlots(cv *probe.ClusterView) bool {
	return cv != nil && cv.Myself.Master && len(cv.Myself.Slots) > 0
}

// shardInSync: the pod serves what its shard's master has: ready, and
// either that master, or a replica of it by its own CLUSTER NODES line
// with its replication link up and, when the master holds data, holding
// data too.
func (v shardedView) shardInSync(p PodState) bool {
	cv := v.views[p.Name]
	if cv == nil || !p.Ready {
		return false
	}
	master, mv := v.shardMaster(v.shardOf(p))
	if mv == nil {
		return false
	}
	if p.Name == master.Name {
		return true
	}
	return cv.Myself.MasterID == mv.Myself.ID && p.Obs.Role == "slave" && p.Obs.MasterLinkUp &&
		(master.Obs.Keys == 0 || p.Obs.Keys > 0)
}

// bestShardReplica is the in-sync replica of shard i that may take over
// (ok), with the highest offset, then the lowest ordinal; "" when none.
func (v shardedView) bestShardReplica(i int, ok func(PodState) bool) string {
	best := PodState{}
	for _, p := range v.pods {
		if v.shardOf(p) != i || p.Deleting || servesSlots(v.views[p.Name]) || !ok(p) || !v.shardInSync(p) {
			continue
		}
		if best.Name == "" || p.Obs.Offset > best.Obs.Offset {
			best = p
		}
	}
	return best.Name
}

// planShardRestart restarts, one at a time, every pod of the layout that
// does not run target's template: the replicas of every shard from the
// highest ordinal, then shard by shard a switchover and the old master.
// The next pod restarts only when every restarted pod is ready, in sync
// with its shard's master and checked.
func planShardRestart(v shardedView, target cachev1alpha1.RolloutValues, rollingBack bool) Action {
	s := v.s
	op := s.Operation
	sts := s.StatefulSet
	if sts == nil || !sts.Settled || sts.TemplateKey != renderer.TemplateKey(target) {
		return Action{Type: ActionWait, Reason: "waiting for the StatefulSet to take the approved template"}
	}
	outdated := func(p PodState) bool {
		if p.Revision != sts.UpdateRevision {
			return true
		}
		return op.RestartAll && !rollingBack && p.Created.Before(op.StartedAt.Time)
	}
	// The shards the pods run now: a change of spec.shards waits for the
	// rollout (resharding goes after it).
	n := v.runningShards()
	masters := make([]PodState, n)
	mastersOutdated := true
	for i := range n {
		m, mv := v.shardMaster(i)
		if mv == nil {
			return Action{Type: ActionWait, Reason: fmt.Sprintf("shard %d has no master that answers", i)}
		}
		masters[i] = m
		mastersOutdated = mastersOutdated && outdated(m)
	}
	for o := range n * s.Sharded.PodsPerShard {
		name := v.podName(o)
		p, ok := s.Pod(name)
		var why string
		switch {
		case !ok || p.Deleting:
			why = name + " is being recreated"
		case !outdated(p) && !v.shardInSync(p):
			why = fmt.Sprintf("%s is not ready and in sync with shard %d's master %s yet", name, v.shardOf(p), masters[v.shardOf(p)].Name)
		}
		if why == "" {
			continue
		}
		if stepExpired(s) {
			if !rollingBack && pastNoReturn(op, mastersOutdated) {
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
	// Each restarted replica is read against its own shard's master.
	for i, m := range masters {
		if a, ok := planDataCheck(s, m, func(p PodState) bool { return v.shardOf(p) == i && !outdated(p) }); ok {
			return a
		}
	}
	for i := len(v.pods) - 1; i >= 0; i-- {
		p := v.pods[i]
		if p.Deleting || !outdated(p) || v.shardOf(p) >= n || servesSlots(v.views[p.Name]) {
			continue
		}
		if since := s.Now.Sub(stepStart(op)); !outdated(masters[v.shardOf(p)]) && since < SwitchoverSettle {
			// The shard's master changed in this rollout: p is its old
			// master, which clients may still send the shard's keys to.
			return Action{Type: ActionWait, Pod: p.Name, Reason: fmt.Sprintf("%s restarts %s after its shard's switchover, so clients learn the new master from its MOVED answers", p.Name, SwitchoverSettle)}
		}
		return Action{Type: ActionRestartPod, Pod: p.Name, Reason: fmt.Sprintf("%s: replica %d of shard %d", op.Type, p.Ordinal(), v.shardOf(p))}
	}
	for i, m := range masters {
		if !outdated(m) {
			continue
		}
		if s.Sharded.PodsPerShard == 1 {
			return Action{Type: ActionRestartPod, Pod: m.Name, Reason: fmt.Sprintf("%s: shard %d's only pod; it restarts as master (the shard's slots are not served meanwhile)", op.Type, i)}
		}
		cand := v.bestShardReplica(i, func(p PodState) bool { return !outdated(p) })
		if cand == "" {
			return Action{Type: ActionWait, Reason: fmt.Sprintf("no replica of shard %d on the new template is in sync to take over from %s", i, m.Name)}
		}
		return startSwitchover(s, m.Name, cand, rollingBack, fmt.Sprintf("shard %d: switchover before its master restarts", i))
	}
	return rolloutDone(op, rollingBack)
}

// planShardSwitchover hands a shard's slots from op.FromPod to op.ToPod
// with CLUSTER FAILOVER on the replica, and confirms it from both nodes'
// own CLUSTER NODES lines.
func planShardSwitchover(v shardedView) Action {
	s := v.s
	op := s.Operation
	fv, tv := v.views[op.FromPod], v.views[op.ToPod]
	from, _ := s.Pod(op.FromPod)
	shard := v.shardOf(from)
	if servesSlots(tv) {
		if servesSlots(fv) {
			return Action{Type: ActionWait, Pod: op.FromPod, Reason: fmt.Sprintf("switchover: %s serves shard %d's slots and %s still says it does", op.ToPod, shard, op.FromPod)}
		}
		return Action{Type: ActionEndShardSwitchover, Pod: op.ToPod, Master: op.FromPod, Operation: afterSwitchover(op, s.Now),
			Reason: fmt.Sprintf("shard %d: %s serves its slots", shard, op.ToPod)}
	}
	abort := func(why string) Action {
		reason := fmt.Sprintf("switchover of shard %d to %s aborted: %s", shard, op.ToPod, why)
		if op.Type == cachev1alpha1.OperationUpgrade && op.Step == cachev1alpha1.StepSwitchover && op.Previous != nil && !pastNoReturn(op, v.mastersOutdated()) {
			next := op.DeepCopy()
			next.Step, next.StepStartedAt, next.FromPod, next.ToPod, next.Reason = cachev1alpha1.StepRollback, timeRef(s.Now), "", "", "rollback: "+reason
			return Action{Type: ActionEndShardSwitchover, Master: op.FromPod, Operation: next, Values: op.Previous, Reason: reason}
		}
		return Action{Type: ActionEndShardSwitchover, Master: op.FromPod, Operation: afterSwitchover(op, s.Now), Reason: reason + "; it is tried again"}
	}
	if m, mv := v.shardMaster(shard); mv != nil && m.Name != op.FromPod {
		// The shard failed over meanwhile (Redis Cluster's election): the
		// rollout goes on from the nodes' new layout.
		return abort(fmt.Sprintf("%s serves the shard now", m.Name))
	}
	if stepExpired(s) {
		return abort(fmt.Sprintf("not done within %s", s.StepDeadline))
	}
	switch {
	case tv == nil:
		return Action{Type: ActionWait, Pod: op.ToPod, Reason: "switchover: waiting for the target to answer"}
	case !servesSlots(fv):
		return Action{Type: ActionWait, Pod: op.FromPod, Reason: "switchover: waiting for the master to answer"}
	case tv.Myself.MasterID != fv.Myself.ID || !v.shardInSync(mustPod(s, op.ToPod)):
		return Action{Type: ActionWait, Pod: op.ToPod, Reason: "switchover: waiting for the target to follow the master"}
	}
	if issued := s.SwitchoverIssuedAt; !issued.IsZero() {
		if s.Now.Sub(issued) > ShardFailoverTimeout+s.ProbeTimeout+time.Second {
			// Redis gave the manual failover up (the replica did not catch
			// up, or the masters did not vote in time): the master serves
			// its clients again.
			return abort("CLUSTER FAILOVER did not complete within " + ShardFailoverTimeout.String())
		}
		return Action{Type: ActionWait, Pod: op.ToPod, Reason: "switchover: CLUSTER FAILOVER in progress"}
	}
	return Action{Type: ActionShardFailover, Pod: op.ToPod, Master: op.FromPod, Reason: fmt.Sprintf("shard %d: switchover %s→%s", shard, op.FromPod, op.ToPod)}
}

// mastersOutdated: no shard's master runs the StatefulSet's update
// revision, so an upgrade to a newer RDB format can still roll back.
func (v shardedView) mastersOutdated() bool {
	sts := v.s.StatefulSet
	for i := range v.runningShards() {
		if m, mv := v.shardMaster(i); mv != nil && sts != nil && m.Revision == sts.UpdateRevision {
			return false
		}
	}
	return true
}

// runningShards is the number of shards of the approved pod count: the
// layout the pods run, which spec.shards may already differ from.
func (v shardedView) runningShards() int {
	if v.s.Approved == nil {
		return v.s.Sharded.Shards
	}
	return int(v.s.Approved.Replicas) / v.s.Sharded.PodsPerShard
}

// stepStart is when the operation's step began (its start when unknown).
func stepStart(op *cachev1alpha1.OperationStatus) time.Time {
	if op.StepStartedAt != nil {
		return op.StepStartedAt.Time
	}
	return op.StartedAt.Time
}

func mustPod(s Snapshot, name string) PodState {
	p, _ := s.Pod(name)
	return p
}

// shardedSeedSource is the pod a sharded cluster's pre-check copies: one
// shard's data, the in-sync replica holding the most keys (the master of
// a shard without one is not asked to fork unless no replica is in sync).
// The configuration and the version are the same on every shard; the
// largest shard's data is the most a pod of the new template must load.
func shardedSeedSource(s Snapshot) (PodState, bool) {
	v := newShardedView(s)
	var best PodState
	found := false
	for _, replicas := range []bool{true, false} {
		for _, p := range v.pods {
			if v.removed(p) || p.IP == "" || !v.shardInSync(p) || servesSlots(v.views[p.Name]) != !replicas {
				continue
			}
			if !found || p.Obs.Keys > best.Obs.Keys {
				best, found = p, true
			}
		}
		if found {
			return best, true
		}
	}
	return PodState{}, false
}

// clusterParametersToSet are the cluster parameters some node that answers
// runs with another value than spec asks (a change of
// spec.highAvailability), with the value asked for.
func (v shardedView) clusterParametersToSet() map[string]string {
	out := map[string]string{}
	for _, p := range v.pods {
		cv := v.views[p.Name]
		if cv == nil {
			continue
		}
		for k, want := range v.s.Sharded.Parameters {
			if got, ok := cv.Parameters[k]; ok && !renderer.SameParam(got, want) {
				out[k] = want
			}
		}
	}
	return out
}

// nextClusterParameters starts a Reconfigure when a node runs cluster
// parameters spec no longer asks for: they follow
// spec.highAvailability, which the pods' template does not hold.
func nextClusterParameters(v shardedView) Action {
	set := v.clusterParametersToSet()
	if len(set) == 0 {
		return Action{Type: ActionNone}
	}
	var from map[string]cachev1alpha1.ConfigValue
	for _, p := range v.pods {
		if cv := v.views[p.Name]; cv != nil && len(cv.Parameters) > 0 {
			from = map[string]cachev1alpha1.ConfigValue{}
			for k, val := range cv.Parameters {
				from[k] = cachev1alpha1.ConfigValue(val)
			}
			break
		}
	}
	reason := strings.Replace(describeConfig(from, set), ": applied live", " (spec.highAvailability): applied live", 1)
	return Action{Type: ActionStartOperation, Reason: reason, Operation: &cachev1alpha1.OperationStatus{
		Type: cachev1alpha1.OperationReconfigure, Reason: reason, Target: v.s.Approved.DeepCopy(),
	}}
}

// planShardedReconfigure is planReconfigure for a sharded cluster: the
// changed parameters of spec.config and the cluster parameters some node
// runs with another value are set on every node at once.
func planShardedReconfigure(v shardedView) Action {
	s := v.s
	op := s.Operation
	live, _ := renderer.ConfigChange(s.Approved.Config, op.Target.Config)
	for k, val := range v.clusterParametersToSet() {
		live[k] = val
	}
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
