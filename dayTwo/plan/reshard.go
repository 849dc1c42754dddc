package plan

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// Steps of resharding (reshard.go): a change of spec.shards moves slots
// between the shards' masters, a batch at a time, each batch in three
// steps the nodes show (CLUSTER NODES markers, COUNTKEYSINSLOT), so a
// restarted operator continues from what they say.
const (
	// ActionSlotsMigrating marks Slots importing on Master's node (from
	// Pod's) and migrating on Pod's node (to Master's): CLUSTER SETSLOT
	// IMPORTING on the target, then MIGRATING on the source.
	ActionSlotsMigrating ActionType = "SlotsMigrating"
	// ActionMigrateKeys moves the keys of Slots from Pod's node to
	// Master's (CLUSTER GETKEYSINSLOT, MIGRATE … KEYS), a bounded amount.
	ActionMigrateKeys ActionType = "MigrateKeys"
	// ActionSlotsAssign gives Slots to Master's node: CLUSTER SETSLOT
	// NODE on it, on Pod's (the source) and on every other master (Pods).
	ActionSlotsAssign ActionType = "SlotsAssign"
	// ActionSlotsReimport repairs Slots importing on Master's node only
	// (a source that failed over): Master's node is told Pod's serves them
	// (SETSLOT NODE, which keeps the import; it had kept the dead owner
	// and reported the slots unserved), then both sides are marked again.
	ActionSlotsReimport ActionType = "SlotsReimport"
	// ActionClusterForget has Pod's node forget NodeIDs (CLUSTER FORGET).
	ActionClusterForget ActionType = "ClusterForget"
	// ActionClusterReset makes a removed pod's node forget the cluster
	// (CLUSTER RESET HARD: a new node ID, no peers), so its volume, if
	// the shard is added again, brings no stale identity back.
	ActionClusterReset ActionType = "ClusterReset"
	// ActionResizeShards approves Values, whose only change is the pod
	// count: day-one adds a new shard's pods, or removes an emptied one's.
	ActionResizeShards ActionType = "ResizeShards"
)

// MigrateBatchSlots is the most slots one batch moves; MigrateBatchKeys
// the most keys one MIGRATE carries.
const (
	MigrateBatchSlots = probe.MaxCountedSlots
	MigrateBatchKeys  = 100
)

// SlotMove is slots that move from one shard to another.
type SlotMove struct {
	From, To int
	Slots    []probe.SlotRange
}

// Count is the number of slots of the move.
func (m SlotMove) Count() int {
	n := 0
	for _, r := range m.Slots {
		n += r.Len()
	}
	return n
}

// TargetShard is the shard that serves slot in the even layout of n
// shards.
func TargetShard(slot, n int) int {
	if n <= 0 || slot < 0 || slot >= cachev1alpha1.SlotCount {
		return -1
	}
	// EvenSlots gives the first extra shards one slot more than base.
	base, extra := cachev1alpha1.SlotCount/n, cachev1alpha1.SlotCount%n
	if long := extra * (base + 1); slot >= long {
		return extra + (slot-long)/base
	}
	return slot / (base + 1)
}

// PlanMoves is what moves for the slots to reach the even layout of n
// shards: owner holds the shard serving each slot (-1: none). The target
// is the even layout, not the fewest moves: every layout the operator
// leaves is EvenSlots of its shard count, so where a slot lives follows
// from spec alone, and a move interrupted at any point is planned again
// from the nodes alike. Moves of a shard that is removed (index n or
// more) come first, so it empties before anything else moves.
func PlanMoves(owner []int, n int) []SlotMove {
	type pair struct{ from, to int }
	byPair := map[pair][]probe.SlotRange{}
	for s, o := range owner {
		t := TargetShard(s, n)
		if o < 0 || o == t {
			continue
		}
		p := pair{o, t}
		rs := byPair[p]
		if k := len(rs); k > 0 && rs[k-1].End == s-1 {
			rs[k-1].End = s
		} else {
			rs = append(rs, probe.SlotRange{Start: s, End: s})
		}
		byPair[p] = rs
	}
	out := make([]SlotMove, 0, len(byPair))
	for p, rs := range byPair {
		out = append(out, SlotMove{From: p.from, To: p.to, Slots: rs})
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := out[i].From >= n, out[j].From >= n
		if ri != rj {
			return ri
		}
		return out[i].Slots[0].Start < out[j].Slots[0].Start
	})
	return out
}

// MovesStatus writes moves as status.operation.resharding does.
func MovesStatus(from, to int, moves []SlotMove) *cachev1alpha1.ReshardingPlan {
	p := &cachev1alpha1.ReshardingPlan{FromShards: int32(from), ToShards: int32(to)}
	for _, m := range moves {
		p.SlotsToMove += int32(m.Count())
		p.Moves = append(p.Moves, cachev1alpha1.SlotMove{From: int32(m.From), To: int32(m.To), Slots: SlotStrings(m.Slots)})
	}
	return p
}

// nodePods maps every node ID the cluster knows to its pod: by the pod's
// own word, else (a node that does not answer) by its address in the
// introducer's view.
func (v shardedView) nodePods() map[string]PodState {
	podOf := map[string]PodState{}
	for _, p := range v.pods {
		if cv := v.views[p.Name]; cv != nil {
			podOf[cv.Myself.ID] = p
		}
	}
	_, ref := v.introducer()
	if ref == nil {
		return podOf
	}
	for _, n := range ref.Nodes {
		if _, ok := podOf[n.ID]; ok || n.IP == "" {
			continue
		}
		for _, p := range v.pods {
			if p.IP == n.IP {
				podOf[n.ID] = p
			}
		}
	}
	return podOf
}

// claims are, for each slot, the pods whose nodes serve it: each master
// that answers by its own word, one that does not by the introducer's.
// planSharded computes them once per pass (shardedView.claimed). A slot
// one pod serves shares that pod's one-element slice; only a slot two
// pods claim gets a slice of its own.
func (v shardedView) claims() [][]string {
	out := make([][]string, cachev1alpha1.SlotCount)
	alone := map[string][]string{}
	add := func(pod string, rs []probe.SlotRange) {
		one, ok := alone[pod]
		if !ok {
			one = []string{pod}
			alone[pod] = one
		}
		for _, r := range rs {
			for s := max(r.Start, 0); s <= min(r.End, cachev1alpha1.SlotCount-1); s++ {
				switch {
				case len(out[s]) == 0:
					out[s] = one
				case !slices.Contains(out[s], pod):
					// Clip: never append into a shared slice.
					out[s] = append(slices.Clip(out[s]), pod)
				}
			}
		}
	}
	for _, p := range v.pods {
		if cv := v.views[p.Name]; cv != nil && cv.Myself.Master {
			add(p.Name, cv.Myself.Slots)
		}
	}
	if _, ref := v.introducer(); ref != nil {
		podOf := v.nodePods()
		for _, n := range ref.Nodes {
			p, ok := podOf[n.ID]
			if !ok || !n.Master || n.Failed || v.views[p.Name] != nil {
				continue
			}
			add(p.Name, n.Slots)
		}
	}
	return out
}

// shardLead is the pod that serves shard i's slots, or, for a shard that
// serves none yet (a new one), its lowest-ordinal pod that is a master
// without slots and follows no one. A shard whose slots a node serves by
// some answering node's word, while that node has not answered itself
// (its pod not probed yet after an operator restart), has no lead yet:
// an empty node of the shard (a pod back on a new volume) would be taken
// for a new shard's lead, and the shard's replicas would resynchronise
// from it and drop their copy.
func (v shardedView) shardLead(i int) (PodState, *probe.ClusterView) {
	if p, cv := v.shardMaster(i); cv != nil {
		return p, cv
	}
	if v.servedBySilentNode(i) {
		return PodState{}, nil
	}
	for _, p := range v.pods {
		if cv := v.views[p.Name]; cv != nil && v.shardOf(p) == i && cv.Myself.Master && len(cv.Myself.Slots) == 0 {
			return p, cv
		}
	}
	return PodState{}, nil
}

// servedBySilentNode: some answering node lists a master that serves
// slots and whose pod is of shard i.
func (v shardedView) servedBySilentNode(i int) bool {
	podOf := v.nodePods()
	for _, cv := range v.views {
		for _, n := range cv.Nodes {
			if p, ok := podOf[n.ID]; ok && n.Master && len(n.Slots) > 0 && v.shardOf(p) == i {
				return true
			}
		}
	}
	return false
}

// layoutPods is the number of pods of spec's layout.
func (v shardedView) layoutPods() int { return v.s.Sharded.Shards * v.s.Sharded.PodsPerShard }

// removed: the pod is beyond spec's layout (a shard being removed).
func (v shardedView) removed(p PodState) bool { return p.Ordinal() >= v.layoutPods() }

// inFlight is a slot some node shows importing or migrating: Owner is the
// pod that serves it, To the pod whose node takes it.
type inFlight struct {
	slot      int
	owner, to string
	// taken: the node it goes to serves it already (SETSLOT NODE
	// reached it and not every other master).
	taken bool
}

// moving are the slots some node marks importing or migrating, with the
// node they go to; the first error is a marker that names a node no pod
// is known for.
func (v shardedView) moving(claims [][]string) ([]inFlight, string) {
	podOf := v.nodePods()
	to := map[int]string{}
	for _, p := range v.pods {
		cv := v.views[p.Name]
		if cv == nil {
			continue
		}
		for s, id := range cv.Myself.Migrating {
			t, ok := podOf[id]
			if !ok {
				return nil, fmt.Sprintf("%s migrates slot %d to node %s, which no pod is", p.Name, s, id)
			}
			if _, seen := to[s]; !seen {
				to[s] = t.Name
			}
		}
		for s := range cv.Myself.Importing {
			// The importing side is where the keys moved so far are:
			// the slot finishes there.
			to[s] = p.Name
		}
	}
	out := make([]inFlight, 0, len(to))
	for s, t := range to {
		f := inFlight{slot: s, to: t, taken: slices.Contains(claims[s], t)}
		for _, c := range claims[s] {
			if c != t {
				f.owner = c
			}
		}
		if f.owner == "" && len(claims[s]) > 0 {
			f.owner = t
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].slot < out[j].slot })
	return out, ""
}

// planReshard changes a formed cluster's shard count to spec's. The
// operation (status.operation, type Scaling) records the planned moves;
// every step is decided from what the nodes report: grow the StatefulSet,
// let the new pods meet and replicate (planMeet, planReplicas), finish
// any slot some node shows importing or migrating, move the next batch,
// then for a removed shard check it serves nothing, have every other node
// forget it and only then shrink the StatefulSet.
func planReshard(v shardedView) Action {
	s := v.s
	n, pps := s.Sharded.Shards, s.Sharded.PodsPerShard
	approved := *s.Approved
	claims := v.claimed
	for slot, c := range claims {
		if len(c) > 1 && !v.migratingBetween(slot, c) {
			return Action{Type: ActionWait, Alert: cachev1alpha1.ReasonSlotsNotServed,
				Reason: fmt.Sprintf("slot %d is served by %v at once and no node shows it migrating; the nodes' config epochs decide (CLUSTER NODES on each), a person may have to fix it with CLUSTER SETSLOT", slot, c)}
		}
	}
	shardOf := map[string]int{}
	for _, p := range v.pods {
		shardOf[p.Name] = v.shardOf(p)
	}
	owner := make([]int, cachev1alpha1.SlotCount)
	for slot, c := range claims {
		owner[slot] = -1
		if len(c) > 0 {
			owner[slot] = shardOf[c[0]]
		}
	}
	moves := PlanMoves(owner, n)
	flying, bad := v.moving(claims)
	if bad != "" {
		return Action{Type: ActionWait, Reason: bad}
	}
	removedPods := []PodState{}
	for _, p := range v.pods {
		if v.removed(p) {
			removedPods = append(removedPods, p)
		}
	}
	forget := v.toForget(removedPods)
	op := s.Operation
	busy := int(approved.Replicas) != n*pps || len(moves) > 0 || len(flying) > 0 || len(removedPods) > 0
	if op == nil {
		if !busy {
			return Action{Type: ActionNone}
		}
		from := int(approved.Replicas) / pps
		why := fmt.Sprintf("spec.shards %d → %d: %d slots move", from, n, countSlots(moves))
		if from == n {
			why = fmt.Sprintf("%d slots are left moving or off the even layout (a migration cut off by a crash, or a restored backup's layout): they are finished, then moved to the even layout", len(flying)+countSlots(moves))
		}
		return Action{Type: ActionStartOperation, Reason: why,
			Operation: &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationScaling, Reason: why, Resharding: MovesStatus(from, n, moves)}}
	}
	if op.Type != cachev1alpha1.OperationScaling {
		return Action{Type: ActionWait, Reason: fmt.Sprintf("%s %s runs; resharding waits", op.Type, op.ID)}
	}
	if op.Resharding == nil || int(op.Resharding.ToShards) != n {
		// spec.shards changed again: the plan is made again from the
		// nodes; slots already moving finish first.
		next := op.DeepCopy()
		from := int(approved.Replicas) / pps
		if op.Resharding != nil {
			from = int(op.Resharding.FromShards)
		}
		next.Resharding = MovesStatus(from, n, moves)
		next.Reason = fmt.Sprintf("spec.shards %d → %d: %d slots move", from, n, countSlots(moves))
		return Action{Type: ActionNextStep, Operation: next, Reason: "spec.shards changed during resharding"}
	}
	if int(approved.Replicas) < n*pps {
		grown := approved
		grown.Replicas = int32(n * pps)
		return Action{Type: ActionResizeShards, Values: &grown, Reason: fmt.Sprintf("add the pods of shards %d to %d", int(approved.Replicas)/pps, n-1)}
	}
	// A slot left moving is finished first, whatever else is down: a
	// crashed source's replica serves it now.
	if a := v.planFlying(flying); a.Type != ActionNone {
		return a
	}
	// Every shard of the layout must have a master that answers and that
	// every node knows before slots go to it.
	for o := range n * pps {
		if v.views[v.podName(o)] == nil {
			return Action{Type: ActionWait, Pod: v.podName(o), Reason: "waiting for every pod of the layout to answer CLUSTER NODES before slots move"}
		}
	}
	if len(moves) > 0 {
		return v.planMove(moves[0])
	}
	// Nothing moves any more: a removed shard's nodes are checked empty,
	// then forgotten everywhere, and only then do its pods go.
	for _, p := range removedPods {
		cv := v.views[p.Name]
		if cv == nil {
			if len(forget) > 0 {
				return Action{Type: ActionWait, Pod: p.Name, Reason: p.Name + " is to be removed; waiting for it to answer, to check it holds no key before it is forgotten"}
			}
			continue
		}
		if cv.Myself.Master && (len(cv.Myself.Slots) > 0 || p.Obs.Keys > 0) {
			return Action{Type: ActionWait, Pod: p.Name, Reason: fmt.Sprintf("%s is to be removed but serves %d slot ranges and holds %d keys", p.Name, len(cv.Myself.Slots), p.Obs.Keys)}
		}
	}
	for _, pod := range slices.Sorted(maps.Keys(forget)) {
		return Action{Type: ActionClusterForget, Pod: pod, NodeIDs: forget[pod], Reason: fmt.Sprintf("%s still knows the nodes of removed pods", pod)}
	}
	for _, p := range removedPods {
		if cv := v.views[p.Name]; cv != nil && len(cv.Nodes) > 1 {
			return Action{Type: ActionClusterReset, Pod: p.Name, Reason: p.Name + " is removed and no remaining node knows it; it forgets the cluster"}
		}
	}
	if int(approved.Replicas) > n*pps {
		shrunk := approved
		shrunk.Replicas = int32(n * pps)
		return Action{Type: ActionResizeShards, Values: &shrunk, Reason: fmt.Sprintf("shards %d to %d serve no slot and no node knows them", n, int(approved.Replicas)/pps-1)}
	}
	if len(removedPods) > 0 {
		return Action{Type: ActionWait, Pod: removedPods[0].Name, Reason: "waiting for the StatefulSet to remove the pods of the removed shards"}
	}
	return Action{Type: ActionCompleteOperation, Reason: fmt.Sprintf("%d shards serve the even layout", n)}
}

// planMoving repairs a slot left moving before anything waits for every
// node to report cluster_state:ok: the importing node keeps the slot's
// old owner while it imports (Redis ignores newer claims on it), so after
// a source that failed over it reports the slot unserved and refuses
// clients until the migration is finished.
func planMoving(v shardedView) Action {
	if v.s.Approved == nil {
		return Action{Type: ActionNone}
	}
	if flying, _ := v.moving(v.claimed); len(flying) == 0 {
		return Action{Type: ActionNone}
	}
	return planReshard(v)
}

// migratingBetween: the pods that serve slot at once are a migration's
// two ends, one marking it migrating to the other (a SETSLOT NODE that
// reached the target and not yet the source).
func (v shardedView) migratingBetween(slot int, pods []string) bool {
	if len(pods) != 2 {
		return false
	}
	podOf := v.nodePods()
	for i, name := range pods {
		cv := v.views[name]
		if cv == nil {
			continue
		}
		if id, ok := cv.Myself.Migrating[slot]; ok && podOf[id].Name == pods[1-i] {
			return true
		}
	}
	return false
}

// planFlying finishes the slots some node shows moving, towards the node
// that imports them (it holds the keys moved so far), a batch of slots
// with the same two ends at a time.
func (v shardedView) planFlying(flying []inFlight) Action {
	if len(flying) == 0 {
		return Action{Type: ActionNone}
	}
	first := flying[0]
	var batch []inFlight
	for _, f := range flying {
		if f.owner == first.owner && f.to == first.to && f.taken == first.taken && len(batch) < MigrateBatchSlots {
			batch = append(batch, f)
		}
	}
	slots := make([]int, len(batch))
	for i, f := range batch {
		slots[i] = f.slot
	}
	ranges := toRanges(slots)
	if first.owner == "" {
		return Action{Type: ActionWait, Reason: fmt.Sprintf("slot %d is moving to %s but no node serves it", first.slot, first.to)}
	}
	if first.taken {
		// The target serves it already: the source and the other
		// masters learn it.
		return v.assign(first.owner, first.to, ranges, "slots served by their new owner are still marked moving elsewhere")
	}
	src, tgt := v.views[first.owner], v.views[first.to]
	if src == nil || tgt == nil {
		return Action{Type: ActionWait, Reason: fmt.Sprintf("slot %d moves from %s to %s and one of them does not answer", first.slot, first.owner, first.to)}
	}
	for _, s := range slots {
		if _, importing := tgt.Myself.Importing[s]; importing && src.Myself.Migrating[s] != tgt.Myself.ID {
			// Importing on one side only (an operator stopped between
			// the two SETSLOTs, or the source failed over to a replica
			// that keeps no migration state): the importing node kept
			// the slot's old owner (Redis ignores newer claims on a slot
			// it imports) and refuses keys of it, so it is told the
			// owner first, then both sides are marked again.
			return Action{Type: ActionSlotsReimport, Pod: first.owner, Master: first.to, Slots: ranges,
				Reason: fmt.Sprintf("slot %d is importing on %s, and %s, which serves it, does not migrate it", s, first.to, first.owner)}
		}
		if src.Myself.Migrating[s] != tgt.Myself.ID || tgt.Myself.Importing[s] != src.Myself.ID {
			// Migrating on the source only (the target failed over):
			// mark both again.
			return Action{Type: ActionSlotsMigrating, Pod: first.owner, Master: first.to, Slots: ranges,
				Reason: fmt.Sprintf("slot %d is marked moving on one side only", s)}
		}
	}
	for _, s := range slots {
		if k, counted := src.MigratingKeys[s]; !counted || k > 0 {
			return Action{Type: ActionMigrateKeys, Pod: first.owner, Master: first.to, Slots: ranges,
				Reason: fmt.Sprintf("%s still holds keys of slot %d", first.owner, s)}
		}
	}
	return v.assign(first.owner, first.to, ranges, fmt.Sprintf("%s holds no key of the slots any more", first.owner))
}

// assign gives slots to target's node on target, source and every other
// master that answers.
func (v shardedView) assign(source, target string, slots []probe.SlotRange, reason string) Action {
	var others []string
	for _, p := range v.pods {
		if cv := v.views[p.Name]; cv != nil && cv.Myself.Master && p.Name != source && p.Name != target {
			others = append(others, p.Name)
		}
	}
	return Action{Type: ActionSlotsAssign, Pod: source, Master: target, Slots: slots, Pods: others, Reason: reason}
}

// planMove starts the next batch of a move: its first slots, up to
// MigrateBatchSlots, from the source shard's master to the target's.
func (v shardedView) planMove(m SlotMove) Action {
	src, sv := v.shardMaster(m.From)
	tgt, tv := v.shardLead(m.To)
	switch {
	case sv == nil:
		return Action{Type: ActionWait, Reason: fmt.Sprintf("shard %d's slots are to move but no pod of it serves them", m.From)}
	case tv == nil:
		return Action{Type: ActionWait, Reason: fmt.Sprintf("shard %d has no master to take slots", m.To)}
	case !knows(sv, tv.Myself.ID) || !knows(tv, sv.Myself.ID):
		return Action{Type: ActionWait, Reason: fmt.Sprintf("gossip has not told %s and %s of each other yet", src.Name, tgt.Name)}
	}
	var batch []probe.SlotRange
	left := MigrateBatchSlots
	for _, r := range m.Slots {
		if left == 0 {
			break
		}
		end := min(r.End, r.Start+left-1)
		batch = append(batch, probe.SlotRange{Start: r.Start, End: end})
		left -= end - r.Start + 1
	}
	return Action{Type: ActionSlotsMigrating, Pod: src.Name, Master: tgt.Name, Slots: batch,
		Reason: fmt.Sprintf("move slots %v from shard %d to shard %d", SlotStrings(batch), m.From, m.To)}
}

// toForget is, by pod that answers and stays, the IDs of removed pods'
// nodes it still knows.
func (v shardedView) toForget(removed []PodState) map[string][]string {
	ids := map[string]bool{}
	ips := map[string]bool{}
	for _, p := range removed {
		if cv := v.views[p.Name]; cv != nil {
			ids[cv.Myself.ID] = true
		}
		if p.IP != "" {
			ips[p.IP] = true
		}
	}
	out := map[string][]string{}
	for _, p := range v.pods {
		cv := v.views[p.Name]
		if cv == nil || v.removed(p) {
			continue
		}
		for _, n := range cv.Nodes {
			if n.ID != cv.Myself.ID && (ids[n.ID] || (ips[n.IP] && !n.Handshake)) {
				out[p.Name] = append(out[p.Name], n.ID)
			}
		}
	}
	return out
}

func countSlots(moves []SlotMove) int {
	n := 0
	for _, m := range moves {
		n += m.Count()
	}
	return n
}

// toRanges folds sorted slots into ranges.
func toRanges(slots []int) []probe.SlotRange {
	var out []probe.SlotRange
	for _, s := range slots {
		if k := len(out); k > 0 && out[k-1].End == s-1 {
			out[k-1].End = s
		} else {
			out = append(out, probe.SlotRange{Start: s, End: s})
		}
	}
	return out
}

// movedKeys estimates the keys moves carry from status.shards' key counts
// (", about N keys"): each move carries its share of its source shard's
// keys, the share of that shard's slots it takes, as keys spread evenly
// over slots (CRC16) unless hash tags gather them. "" when a source
// shard's count is not in the status (not a live object, or an operator
// that does not record it).
func movedKeys(shards []cachev1alpha1.ShardStatus, owner []int, moves []SlotMove) string {
	keys := map[int]int64{}
	for _, sh := range shards {
		if sh.ApproximateKeys != nil {
			keys[int(sh.Index)] = *sh.ApproximateKeys
		}
	}
	served := map[int]int{}
	for _, o := range owner {
		served[o]++
	}
	var total float64
	for _, m := range moves {
		k, ok := keys[m.From]
		if !ok || served[m.From] == 0 {
			return ""
		}
		total += float64(k) * float64(m.Count()) / float64(served[m.From])
	}
	return fmt.Sprintf(", about %s keys by the counts in status.shards", thousands(ApproximateKeys(int64(math.Round(total)))))
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// simulateReshard is the Scaling operation a change of spec.shards starts,
// for `kubectl cache plan`: the slots that move by PlanMoves, from the
// slots status.shards lists (a live object) or else the even layout of
// base's shard count, and the pods added or removed.
func simulateReshard(base, head *cachev1alpha1.CacheCluster) Action {
	from, to := int(base.ShardCount()), int(head.ShardCount())
	owner := make([]int, cachev1alpha1.SlotCount)
	for s := range owner {
		owner[s] = TargetShard(s, from)
	}
	for _, sh := range base.Status.Shards {
		for _, r := range sh.Slots {
			var a, b int
			if n, _ := fmt.Sscanf(r, "%d-%d", &a, &b); n == 1 {
				b = a
			}
			for s := max(a, 0); s <= min(b, cachev1alpha1.SlotCount-1); s++ {
				owner[s] = int(sh.Index)
			}
		}
	}
	moves := PlanMoves(owner, to)
	pps := int(head.PodsPerShard())
	var pods string
	if to > from {
		pods = fmt.Sprintf("pods added: %s-%d to %s-%d", head.Name, from*pps, head.Name, to*pps-1)
	} else {
		pods = fmt.Sprintf("pods removed once their shards serve no slot and are forgotten: %s-%d to %s-%d", head.Name, to*pps, head.Name, from*pps-1)
	}
	desc := fmt.Sprintf("spec.shards %d → %d: %d of %d slots move (about %d%% of the keys%s)", from, to, countSlots(moves), cachev1alpha1.SlotCount,
		(100*countSlots(moves)+cachev1alpha1.SlotCount/2)/cachev1alpha1.SlotCount, movedKeys(base.Status.Shards, owner, moves))
	for _, m := range moves {
		desc += fmt.Sprintf("; shard %d → %d: %s", m.From, m.To, strings.Join(SlotStrings(m.Slots), ","))
	}
	desc += "; " + pods
	return Action{Type: ActionStartOperation, Reason: desc,
		Operation: &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationScaling, Reason: desc, Resharding: MovesStatus(from, to, moves)}}
}
