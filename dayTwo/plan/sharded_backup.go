package plan

import (
	"fmt"
	"strings"
	"time"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// Backups of a sharded cluster (sharded_backup.go): one dump per shard,
// all asked for in one step and recorded in one CacheBackup. A backup is
// an operation like any other: it starts only while nothing else runs (no
// slot moving, every slot served), and a resharding waits while its dumps
// stream.

// ActionRunShardedBackup starts streaming a dump of every shard at once,
// each from its Sources entry, to the backup target.
const ActionRunShardedBackup ActionType = "RunShardedBackup"

// BackupSource is the pod one shard's dump is taken from, why, and the
// slots the shard's master serves now (the backup records them).
type BackupSource struct {
	Shard int
	Pod   string
	Why   string
	Slots []probe.SlotRange
}

// planShardedBackupEnd ends a Backup operation whose CacheBackup is done
// or gone, whatever else the cluster waits for; and one that is not
// streaming when a resharding is due (a change of spec.shards, a slot
// left moving): the backup stays Pending and runs after it. First of the
// sharded rules, so no wait of another rule holds it.
func planShardedBackupEnd(v shardedView) Action {
	op, b := v.s.Operation, v.s.Backup
	if op == nil || op.Type != cachev1alpha1.OperationBackup {
		return Action{Type: ActionNone}
	}
	switch {
	case b == nil || !b.Exists:
		return Action{Type: ActionCompleteOperation, Reason: "the CacheBackup was deleted"}
	case b.Phase == cachev1alpha1.BackupCompleted || b.Phase == cachev1alpha1.BackupFailed:
		return Action{Type: ActionCompleteOperation, Reason: "backup " + b.Name + " " + strings.ToLower(string(b.Phase))}
	case b.Running || v.s.Approved == nil:
		return Action{Type: ActionNone}
	}
	free := v
	free.s.Operation = nil
	if a := planReshard(free); a.Type == ActionStartOperation {
		return Action{Type: ActionCompleteOperation, Reason: "backup " + b.Name + " waits for resharding: " + a.Reason}
	}
	return Action{Type: ActionNone}
}

// planShardedBackup continues a Backup operation of a sharded cluster:
// wait while its dumps stream, else start every shard's dump at once.
func planShardedBackup(v shardedView) Action {
	op, b := v.s.Operation, v.s.Backup
	if op == nil || op.Type != cachev1alpha1.OperationBackup || b == nil {
		return Action{Type: ActionNone}
	}
	if b.Running {
		return Action{Type: ActionWait, Reason: fmt.Sprintf("backup %s is streaming the dumps of %d shards", b.Name, v.s.Sharded.Shards)}
	}
	if v.s.Now.Before(b.RetryAt) {
		return Action{Type: ActionWait, Reason: "backup " + b.Name + " is retried at " + b.RetryAt.Format(time.RFC3339)}
	}
	sources, wait := v.backupSources(b.Stalled)
	if wait != "" {
		return Action{Type: ActionWait, Reason: "backup " + b.Name + " waits: " + wait}
	}
	var parts []string
	for _, src := range sources {
		parts = append(parts, fmt.Sprintf("shard %d from %s", src.Shard, src.Pod))
	}
	return Action{Type: ActionRunShardedBackup, Sources: sources, Reason: "backup " + b.Name + ": " + strings.Join(parts, ", ")}
}

// nextShardedBackup starts the oldest waiting CacheBackup once nothing
// else is to be done.
func nextShardedBackup(v shardedView) Action {
	s := v.s
	if s.Operation != nil || s.PendingBackup == "" {
		return Action{Type: ActionNone}
	}
	return Action{Type: ActionStartOperation, Reason: "backup " + s.PendingBackup, Operation: &cachev1alpha1.OperationStatus{
		Type: cachev1alpha1.OperationBackup, Backup: s.PendingBackup, Reason: fmt.Sprintf("backup %s: one dump per shard, %d shards", s.PendingBackup, s.Sharded.Shards),
	}}
}

// backupSources chooses each shard's source by the rules of a
// replication cluster's backup, among the shard's pods: an in-sync
// replica of the shard's master that is idle and did not stall an earlier
// attempt, then the most data, then the lowest ordinal; the master only
// when it is the only pod of its shard. wait says why a shard has none.
func (v shardedView) backupSources(stalled []string) ([]BackupSource, string) {
	out := make([]BackupSource, 0, v.s.Sharded.Shards)
	for i := range v.s.Sharded.Shards {
		master, mv := v.shardMaster(i)
		if mv == nil {
			return nil, fmt.Sprintf("shard %d has no master that answers", i)
		}
		var pods []PodState
		for _, p := range v.pods {
			if v.shardOf(p) == i && !p.Deleting {
				pods = append(pods, p)
			}
		}
		src := BackupSource{Shard: i, Slots: mv.Myself.Slots}
		if len(pods) == 1 {
			src.Pod, src.Why = master.Name, "the only pod of shard "+fmt.Sprint(i)
		} else {
			src.Pod, src.Why = sourceAmong(pods, master, stalled)
		}
		if src.Pod == "" {
			return nil, fmt.Sprintf("shard %d has no replica of %s that is ready and in sync", i, master.Name)
		}
		out = append(out, src)
	}
	return out, ""
}
