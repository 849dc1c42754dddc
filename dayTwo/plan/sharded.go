package plan

import (
	"fmt"
	"reflect"
	"slices"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// ShardedState is what the planner needs of a sharded cluster beyond the
// pods: its layout from spec and what status.shards says now.
type ShardedState struct {
	Shards       int
	PodsPerShard int
	// Recorded is status.shards.
	Recorded []cachev1alpha1.ShardStatus
	// Parameters are the cluster parameters spec asks every node to run
	// (renderer.ClusterParameters); the nodes report theirs in their
	// ClusterView.
	Parameters map[string]string
	// Restore is the sharded backup a new cluster restores (spec.restore)
	// until its restore is checked; nil otherwise (sharded_restore.go).
	Restore *ShardedRestore
}

// Steps of a sharded cluster (sharded.go).
const (
	// ActionClusterMeet makes Pod meet Master's node (CLUSTER MEET).
	ActionClusterMeet ActionType = "ClusterMeet"
	// ActionClusterAddSlots gives Pod's node the Slots (CLUSTER
	// ADDSLOTSRANGE).
	ActionClusterAddSlots ActionType = "ClusterAddSlots"
	// ActionClusterReplicate makes Pod's node a replica of Master's
	// (CLUSTER REPLICATE).
	ActionClusterReplicate ActionType = "ClusterReplicate"
	// ActionRecordShards writes Shards to status.shards.
	ActionRecordShards ActionType = "RecordShards"
)

// shardedView is the snapshot of a sharded cluster as the rules read it:
// each pod's own view of the cluster, by pod.
type shardedView struct {
	s     Snapshot
	pods  []PodState
	views map[string]*probe.ClusterView
	// claimed is claims(), computed once by planSharded for the rules
	// that read it (planMoving, planReshard).
	claimed [][]string
}

func newShardedView(s Snapshot) shardedView {
	v := shardedView{s: s, pods: SortedPods(s), views: map[string]*probe.ClusterView{}}
	for _, p := range v.pods {
		if Healthy(p) && p.Obs.Cluster != nil {
			v.views[p.Name] = p.Obs.Cluster
		}
	}
	return v
}

// shardOf is the shard of a pod by its ordinal.
func (v shardedView) shardOf(p PodState) int { return p.Ordinal() / v.s.Sharded.PodsPerShard }

// podName is the name of the pod with the ordinal.
func (v shardedView) podName(ordinal int) string { return fmt.Sprintf("%s-%d", v.s.Name, ordinal) }

// formed: some node says every slot is served by a master, so the cluster
// was bootstrapped once, whatever this operator remembers.
func (v shardedView) formed() bool {
	for _, cv := range v.views {
		if cv.SlotsAssigned == cachev1alpha1.SlotCount {
			return true
		}
	}
	return false
}

// planSharded is Next for a sharded cluster: every pod of the layout meets
// the others, each shard's first master gets its even share of the slots,
// the shard's other pods replicate it, and once every node says
// cluster_state:ok the labels and status.shards follow what the nodes
// report. A dead master is Redis Cluster's to replace: its shard's
// replicas elect the one with the most data (docs/sharded.md). A backup's
// end and a restore's layout (sharded_backup.go, sharded_restore.go) are
// decided first; a restored cluster is checked before its pods are
// labelled; a backup runs when no resharding is due, and a resharding
// waits while a backup streams.
func planSharded(s Snapshot) Action {
	v := newShardedView(s)
	v.claimed = v.claims()
	for _, rule := range []func(shardedView) Action{planShardedBackupEnd, planShardedRestore} {
		if a := rule(v); a.Type != ActionNone {
			return a
		}
	}
	if !v.formed() {
		// Bootstrap needs every node of the layout: slots given to a
		// partial cluster would have to move later.
		for o := range s.Sharded.Shards * s.Sharded.PodsPerShard {
			name := v.podName(o)
			if v.views[name] == nil {
				return Action{Type: ActionWait, Pod: name, Reason: "waiting for every pod to answer CLUSTER NODES before the cluster is formed"}
			}
		}
	}
	for _, rule := range []func(shardedView) Action{planMeet, planSlots, planReplicas, planMoving, planCoverage, planShardedRestoreCheck, planShardLabels, planShardStatus} {
		if a := rule(v); a.Type != ActionNone {
			return a
		}
	}
	if a := planTLS(s); a.Type != ActionNone {
		return a
	}
	if s.Approved == nil {
		return Action{Type: ActionApprove, Values: &s.Spec, Reason: "first approval of spec"}
	}
	// A backup in progress streams its dumps; a rolling restart or a
	// configuration change in progress continues (shard_rollout.go);
	// resharding, which also repairs a slot left moving, goes before a new
	// one starts, and so does a waiting backup.
	if a := planShardedBackup(v); a.Type != ActionNone {
		return a
	}
	if op := s.Operation; op != nil && op.Type != cachev1alpha1.OperationScaling && op.Type != cachev1alpha1.OperationBackup {
		return planShardedOperation(v)
	}
	for _, rule := range []func(shardedView) Action{planReshard, nextShardedBackup} {
		if a := rule(v); a.Type != ActionNone {
			return a
		}
	}
	return planShardedOperation(v)
}

// introducer is the lowest-ordinal pod that answers: the one every other
// node is met from.
func (v shardedView) introducer() (PodState, *probe.ClusterView) {
	for _, p := range v.pods {
		if cv := v.views[p.Name]; cv != nil {
			return p, cv
		}
	}
	return PodState{}, nil
}

// planMeet has the introducer meet every node it does not know; gossip
// tells the others.
func planMeet(v shardedView) Action {
	intro, iv := v.introducer()
	if iv == nil {
		return Action{Type: ActionWait, Reason: "no pod answers CLUSTER NODES yet"}
	}
	known := map[string]bool{}
	for _, n := range iv.Nodes {
		if !n.Handshake {
			known[n.ID] = true
		}
	}
	for _, p := range v.pods {
		cv := v.views[p.Name]
		if cv == nil || p.Name == intro.Name || known[cv.Myself.ID] || v.removed(p) {
			// A removed shard's pods are never met again: they are
			// being forgotten.
			continue
		}
		for _, n := range iv.Nodes {
			if n.Handshake && n.IP == p.IP {
				return Action{Type: ActionWait, Pod: p.Name, Reason: intro.Name + " is meeting " + p.Name}
			}
		}
		return Action{Type: ActionClusterMeet, Pod: intro.Name, Master: p.Name, Reason: intro.Name + " does not know " + p.Name + "'s node"}
	}
	for _, p := range v.pods {
		cv := v.views[p.Name]
		if cv == nil || v.removed(p) {
			continue
		}
		for _, q := range v.pods {
			if qv := v.views[q.Name]; qv != nil && !v.removed(q) && !knows(cv, qv.Myself.ID) {
				return Action{Type: ActionWait, Pod: p.Name, Reason: fmt.Sprintf("gossip has not told %s of %s yet", p.Name, q.Name)}
			}
		}
	}
	return Action{Type: ActionNone}
}

func knows(cv *probe.ClusterView, id string) bool {
	for _, n := range cv.Nodes {
		if n.ID == id && !n.Handshake {
			return true
		}
	}
	return false
}

// shardMaster is the pod of shard i whose node serves slots, by its own
// word; "" when none does.
func (v shardedView) shardMaster(i int) (PodState, *probe.ClusterView) {
	for _, p := range v.pods {
		if cv := v.views[p.Name]; cv != nil && v.shardOf(p) == i && cv.Myself.Master && len(cv.Myself.Slots) > 0 {
			return p, cv
		}
	}
	return PodState{}, nil
}

// planSlots gives each shard the part of its even share (a restored
// cluster: of the slots the backup recorded for it) no node serves: all
// of it at bootstrap, the rest after an operator restarted halfway.
// Slots some node serves are never taken from it here (that is a
// migration).
func planSlots(v shardedView) Action {
	var owned slotSet
	for _, cv := range v.views {
		for _, n := range cv.Nodes {
			owned.add(n.Slots...)
		}
	}
	n := v.s.Sharded.Shards
	for i := range n {
		var missing []probe.SlotRange
		for _, r := range v.shardSlots(i) {
			missing = append(missing, owned.missing(r)...)
		}
		if len(missing) == 0 {
			continue
		}
		target, _ := v.shardMaster(i)
		if target.Name == "" {
			for _, p := range v.pods {
				if cv := v.views[p.Name]; cv != nil && v.shardOf(p) == i && cv.Myself.Master && len(cv.Myself.Slots) == 0 {
					target = p
					break
				}
			}
		}
		if target.Name == "" {
			return Action{Type: ActionWait, Reason: fmt.Sprintf("shard %d has slots no node serves and no master to give them to", i)}
		}
		return Action{Type: ActionClusterAddSlots, Pod: target.Name, Slots: missing, Reason: fmt.Sprintf("shard %d's slots %v are not served", i, SlotStrings(missing))}
	}
	return Action{Type: ActionNone}
}

// planReplicas makes every other pod of a shard a replica of the shard's
// master.
func planReplicas(v shardedView) Action {
	for i := range v.s.Sharded.Shards {
		// A new shard's lead serves no slot until slots move to it; its
		// replicas follow it before.
		master, mv := v.shardLead(i)
		if mv == nil {
			continue
		}
		for _, p := range v.pods {
			cv := v.views[p.Name]
			if cv == nil || v.shardOf(p) != i || p.Name == master.Name || cv.Myself.MasterID == mv.Myself.ID {
				continue
			}
			switch {
			case cv.Myself.Master && len(cv.Myself.Slots) > 0:
				return Action{Type: ActionWait, Pod: p.Name, Reason: fmt.Sprintf("%s and %s both serve slots of shard %d", master.Name, p.Name, i)}
			case !knows(cv, mv.Myself.ID):
				return Action{Type: ActionWait, Pod: p.Name, Reason: fmt.Sprintf("gossip has not told %s of %s yet", p.Name, master.Name)}
			}
			return Action{Type: ActionClusterReplicate, Pod: p.Name, Master: master.Name, Reason: fmt.Sprintf("%s is not a replica of its shard's master %s", p.Name, master.Name)}
		}
	}
	return Action{Type: ActionNone}
}

// planCoverage waits until every node that answers says the cluster is ok
// with every slot served.
func planCoverage(v shardedView) Action {
	if msg := v.coverage(); msg != "" {
		return Action{Type: ActionWait, Reason: msg}
	}
	return Action{Type: ActionNone}
}

// coverage says why the cluster does not serve every slot; "" when it does.
func (v shardedView) coverage() string {
	if len(v.views) == 0 {
		return "no node answers CLUSTER INFO"
	}
	for _, p := range v.pods {
		// A removed shard's node forgets the cluster before it goes.
		if cv := v.views[p.Name]; cv != nil && !v.removed(p) && (cv.State != "ok" || cv.SlotsAssigned != cachev1alpha1.SlotCount) {
			return fmt.Sprintf("%s reports cluster_state:%s with %d of %d slots served", p.Name, cv.State, cv.SlotsAssigned, cachev1alpha1.SlotCount)
		}
	}
	return ""
}

// ShardedHealth says why a sharded cluster does not serve every slot, for
// the ShardsReady condition; "" when every node that answers reports
// cluster_state:ok with all 16384 slots served. Empty for a replication
// cluster.
func ShardedHealth(s Snapshot) string {
	if s.Sharded == nil {
		return ""
	}
	return newShardedView(s).coverage()
}

// planShardLabels labels each pod by its role as its node reports it: the
// Services select masters (any is a seed for a cluster-aware client) and
// replicas. A master label goes first off a pod that is no master.
func planShardLabels(v shardedView) Action {
	role := func(p PodState) string {
		cv := v.views[p.Name]
		switch {
		case cv == nil:
			return ""
		case cv.Myself.Master && len(cv.Myself.Slots) > 0:
			return cachev1alpha1.RoleMaster
		case cv.Myself.MasterID != "":
			return cachev1alpha1.RoleReplica
		}
		return ""
	}
	for _, p := range v.pods {
		// A pod not probed yet (each pod is probed on its own clock:
		// right after an operator restart some have not answered) keeps
		// its label until it says what it is.
		if p.RoleLabel == cachev1alpha1.RoleMaster && p.Observed && role(p) != cachev1alpha1.RoleMaster {
			return Action{Type: ActionUnlabel, Pod: p.Name, Reason: p.Name + " serves no slots"}
		}
	}
	for _, p := range v.pods {
		switch want := role(p); {
		case want == cachev1alpha1.RoleMaster && p.RoleLabel != want:
			return Action{Type: ActionLabelMaster, Pod: p.Name}
		case want == cachev1alpha1.RoleReplica && p.RoleLabel != want:
			return Action{Type: ActionLabelReplica, Pod: p.Name}
		}
	}
	return Action{Type: ActionNone}
}

// planShardStatus writes status.shards when the nodes report another
// layout than it says.
func planShardStatus(v shardedView) Action {
	shards := v.Shards()
	if reflect.DeepEqual(shards, v.s.Sharded.Recorded) {
		return Action{Type: ActionNone}
	}
	return Action{Type: ActionRecordShards, Shards: shards, Reason: "the nodes report another layout than status.shards"}
}

// shardKeys is status.shards[i].approximateKeys: what is recorded while
// the master's key count stays near it (KeysNear), else the count
// rounded (ApproximateKeys); what is recorded while the master does not
// answer.
func (v shardedView) shardKeys(i int, master string) *int64 {
	var recorded *int64
	if rec := v.s.Sharded.Recorded; i < len(rec) {
		recorded = rec[i].ApproximateKeys
	}
	p, ok := v.s.Pod(master)
	if !ok || !p.Observed || !p.Obs.Reachable || v.views[master] == nil {
		return recorded
	}
	if recorded != nil && KeysNear(*recorded, p.Obs.Keys) {
		return recorded
	}
	n := ApproximateKeys(p.Obs.Keys)
	return &n
}

// ApproximateKeys rounds a key count to two significant digits (87 stays
// 87, 1,234 is 1,200, 333,412 is 330,000).
func ApproximateKeys(n int64) int64 {
	if n < 100 {
		return n
	}
	unit := int64(1)
	for n/unit >= 100 {
		unit *= 10
	}
	return (n + unit/2) / unit * unit
}

// KeysNear tells whether a recorded approximate count still describes
// the count n: within 10% of it, or 100 keys. A cache's key count moves
// with every write and expiry; status.shards follows it only when it has
// moved that far, so a steady cache writes no status (golden rule 3) and
// a filling one a few dozen times.
func KeysNear(recorded, n int64) bool {
	d := n - recorded
	if d < 0 {
		d = -d
	}
	return d <= max(recorded/10, 100)
}

// Shards is status.shards as the introducer's node reports the cluster:
// each shard's master (the node of one of its pods that serves slots and
// is not failed), its slots and the pods that replicate it.
func (v shardedView) Shards() []cachev1alpha1.ShardStatus {
	_, ref := v.introducer()
	podOf := v.nodePods()
	size := v.s.Sharded.Shards
	if ref != nil {
		// A shard being removed is listed while it serves slots.
		for _, n := range ref.Nodes {
			if p, ok := podOf[n.ID]; ok && n.Master && !n.Failed && len(n.Slots) > 0 {
				size = max(size, v.shardOf(p)+1)
			}
		}
	}
	out := make([]cachev1alpha1.ShardStatus, size)
	for i := range out {
		out[i].Index = int32(i)
	}
	if ref == nil {
		return out
	}
	masterOf := map[string]int{}
	for _, n := range ref.Nodes {
		p, ok := podOf[n.ID]
		if !ok || !n.Master || n.Failed || len(n.Slots) == 0 || v.shardOf(p) >= len(out) {
			continue
		}
		i := v.shardOf(p)
		out[i].Master, out[i].Slots = p.Name, SlotStrings(n.Slots)
		masterOf[n.ID] = i
	}
	for i := range out {
		out[i].ApproximateKeys = v.shardKeys(i, out[i].Master)
	}
	for _, n := range ref.Nodes {
		p, ok := podOf[n.ID]
		if i, follows := masterOf[n.MasterID]; ok && follows && !n.Master {
			out[i].Replicas = append(out[i].Replicas, p.Name)
		}
	}
	for i := range out {
		slices.Sort(out[i].Replicas)
	}
	return out
}
