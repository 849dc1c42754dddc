package plan

import (
	"fmt"
	"strings"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// A new sharded cluster restored from a sharded backup
// (sharded_restore.go): each shard's first pod loads that shard's dump
// before redis-server starts (its other pods start empty and replicate
// it), bootstrap gives each shard the slots the backup recorded, and once
// every slot is served the key count of each shard's master is checked
// against the backup before any pod is labelled.

// ActionRefuseRestore records that the backup does not fit the cluster
// (Reason says why and what to do): the Restored condition turns False
// (RestoreIncompatible) and the cluster is Stalled.
const ActionRefuseRestore ActionType = "RefuseRestore"

// ShardedRestore is the sharded backup a new cluster restores, as its
// manifest says.
type ShardedRestore struct {
	// Where names the backup for people (s3://bucket/folder/).
	Where string
	// Layout are the slot ranges each shard served when the backup was
	// taken, by shard index; nil while the manifest is not read.
	Layout [][]probe.SlotRange
	// Err says why the manifest could not be read (it is read again).
	Err string
	// Refused is the message of a restore refused earlier: the cluster
	// waits for a person.
	Refused string
}

// planShardedRestore holds a restoring cluster until the backup's layout
// is known and fits: the same shard count, every slot given to exactly
// one shard. Before the cluster is formed it says which shard's first
// pod has not loaded its dump yet.
func planShardedRestore(v shardedView) Action {
	r := v.s.Sharded.Restore
	switch {
	case r == nil:
		return Action{Type: ActionNone}
	case r.Refused != "":
		return Action{Type: ActionWait, Reason: "restore refused: " + r.Refused}
	case v.formed():
		// Every slot was given once: the layout is what the nodes say,
		// and the check (planShardedRestoreCheck) reads the manifest
		// again, recording a failure if it stays unreadable.
		return Action{Type: ActionNone}
	case r.Err != "":
		return Action{Type: ActionWait, Reason: "restore: reading the backup's manifest: " + r.Err}
	case r.Layout == nil:
		return Action{Type: ActionWait, Reason: "restore: reading the backup's manifest"}
	}
	if why := layoutFits(r.Layout, v.s.Sharded.Shards); why != "" {
		return Action{Type: ActionRefuseRestore, Reason: fmt.Sprintf("%s: %s", r.Where, why)}
	}
	for i := range v.s.Sharded.Shards {
		lead := v.podName(i * v.s.Sharded.PodsPerShard)
		if v.views[lead] == nil {
			return Action{Type: ActionWait, Pod: lead, Reason: fmt.Sprintf("restore: waiting for %s to load shard %d's dump (kubectl logs %s -c restore)", lead, i, lead)}
		}
	}
	return Action{Type: ActionNone}
}

// layoutFits says why a backup's layout cannot be restored into n
// shards; empty when it can.
func layoutFits(layout [][]probe.SlotRange, n int) string {
	if len(layout) != n {
		return fmt.Sprintf("the backup holds %d shards and the cluster has %d: a sharded backup restores only into the same shard count; create the cluster with shards: %d, then change spec.shards to %d (resharding moves the slots)", len(layout), n, len(layout), n)
	}
	var seen slotSet
	for i, rs := range layout {
		for _, r := range rs {
			for s := r.Start; s <= r.End; s++ {
				if seen.has(s) {
					return fmt.Sprintf("the backup gives slot %d to shard %d and to another shard", s, i)
				}
				seen.add(probe.SlotRange{Start: s, End: s})
			}
		}
	}
	if missing := seen.missing(probe.SlotRange{Start: 0, End: cachev1alpha1.SlotCount - 1}); len(missing) > 0 {
		return fmt.Sprintf("the backup gives slots %s to no shard", strings.Join(SlotStrings(missing), ","))
	}
	return ""
}

// shardSlots is the slots shard i is given at bootstrap: the ones the
// backup recorded for a restored cluster, else its even share.
func (v shardedView) shardSlots(i int) []probe.SlotRange {
	if r := v.s.Sharded.Restore; r != nil && len(r.Layout) == v.s.Sharded.Shards {
		return r.Layout[i]
	}
	return []probe.SlotRange{EvenSlots(i, v.s.Sharded.Shards)}
}

// planShardedRestoreCheck checks a restored cluster once every slot is
// served, before any pod is labelled: each shard's master holds the
// backup's keys of that shard and serves the slots it recorded.
func planShardedRestoreCheck(v shardedView) Action {
	if !v.s.RestorePending || v.s.Sharded.Restore == nil {
		return Action{Type: ActionNone}
	}
	return Action{Type: ActionVerifyRestore, Shards: v.Shards(), Reason: "compare each shard's restored keys and slots with the backup's manifest"}
}
