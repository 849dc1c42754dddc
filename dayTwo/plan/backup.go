package plan

import (
	"slices"
	"sort"
	"strings"
	"time"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// BackupState is the CacheBackup a Backup operation takes, as the planner
// sees it.
type BackupState struct {
	Name   string
	Exists bool
	Phase  cachev1alpha1.BackupPhase
	// Running: this process streams it now.
	Running bool
	// RetryAt is when a failed attempt may be repeated.
	RetryAt time.Time
	// Stalled are the pods an earlier attempt stalled on.
	Stalled []string
	// Attempts is the number of attempts the plan was made on.
	Attempts int32
}

// planBackup continues a Backup operation: stream from the in-sync replica
// with the most data (the master only when it is alone), wait while the
// stream runs, end the operation when the CacheBackup is done or gone.
func planBackup(s Snapshot) Action {
	b := s.Backup
	switch {
	case b == nil || !b.Exists:
		return Action{Type: ActionCompleteOperation, Reason: "the CacheBackup was deleted"}
	case b.Phase == cachev1alpha1.BackupCompleted || b.Phase == cachev1alpha1.BackupFailed:
		return Action{Type: ActionCompleteOperation, Reason: "backup " + b.Name + " " + strings.ToLower(string(b.Phase))}
	case b.Running:
		return Action{Type: ActionWait, Reason: "backup " + b.Name + " is streaming"}
	}
	// Not streaming: a change from git goes first (it may be what the
	// backup waits for, e.g. a fix for a replica that cannot start); the
	// backup stays Pending and runs after it.
	if s.Approved != nil {
		if next := nextChange(s); next.Type == ActionStartOperation {
			return Action{Type: ActionCompleteOperation, Reason: "backup " + b.Name + " waits for " + next.Reason}
		}
	}
	if s.Now.Before(b.RetryAt) {
		return Action{Type: ActionWait, Reason: "backup " + b.Name + " is retried at " + b.RetryAt.Format(time.RFC3339)}
	}
	master, _ := s.Pod(s.CurrentMaster)
	var live int
	for _, p := range s.Pods {
		if !p.Deleting {
			live++
		}
	}
	source, why := "", ""
	if live == 1 {
		source, why = master.Name, "the only pod"
	} else {
		source, why = backupSource(s, master, b.Stalled)
	}
	if source == "" {
		return Action{Type: ActionWait, Reason: "backup " + b.Name + " waits for a replica that is ready and in sync"}
	}
	return Action{Type: ActionRunBackup, Pod: source, Reason: "backup " + b.Name + " from " + source + ": " + why}
}

// backupSource chooses the replica a dump is taken from, and says why: an
// in-sync replica that can serve now (no background save or AOF rewrite
// in progress: a SYNC waits for those) and did not stall an earlier
// attempt of this backup; among equals, the most data, then the lowest
// ordinal. A busy or stalled replica is chosen only when no other is in
// sync; the stall timeout then bounds the wait.
func backupSource(s Snapshot, master PodState, stalled []string) (string, string) {
	return sourceAmong(s.Pods, master, stalled)
}

// sourceAmong is backupSource among pods: the cluster's, or one shard's.
func sourceAmong(pods []PodState, master PodState, stalled []string) (string, string) {
	var cands []PodState
	for _, p := range pods {
		if p.Name != master.Name && !p.Deleting && inSync(p, master) {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return "", ""
	}
	busy := func(p PodState) bool { return p.Obs.Saving || p.Obs.Rewriting }
	stall := func(p PodState) bool { return slices.Contains(stalled, p.Name) }
	rank := func(p PodState) int {
		r := 0
		if busy(p) {
			r += 2
		}
		if stall(p) {
			r++
		}
		return r
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if ri, rj := rank(cands[i]), rank(cands[j]); ri != rj {
			return ri < rj
		}
		if cands[i].Obs.Offset != cands[j].Obs.Offset {
			return cands[i].Obs.Offset > cands[j].Obs.Offset
		}
		return cands[i].Ordinal() < cands[j].Ordinal()
	})
	best := cands[0]
	var passed []string
	for _, p := range cands[1:] {
		if rank(p) > rank(best) {
			passed = append(passed, p.Name+" "+describeSourceState(p, stall(p)))
		}
	}
	var why string
	switch {
	case busy(best) && len(cands) == 1:
		why = "the only in-sync replica, although it " + describeSourceState(best, stall(best))
	case busy(best):
		var all []string
		for _, p := range cands {
			all = append(all, p.Name+" "+describeSourceState(p, stall(p)))
		}
		why = "every in-sync replica is busy (" + strings.Join(all, "; ") + "); " + best.Name + " ranks first"
	case stall(best) && len(cands) == 1:
		why = "the only in-sync replica, although it stalled an earlier attempt; it is idle now"
	case stall(best):
		why = "idle now, although it stalled an earlier attempt (" + strings.Join(passed, "; ") + ")"
	case len(passed) > 0:
		why = "in sync and idle (" + strings.Join(passed, "; ") + ")"
	case len(cands) > 1:
		why = "in sync and idle, with the most data"
	default:
		why = "the only in-sync replica, idle"
	}
	return best.Name, why
}

// describeSourceState says why a replica is a poor source now.
func describeSourceState(p PodState, stalled bool) string {
	var parts []string
	switch {
	case p.Obs.Saving && p.Obs.Rewriting:
		parts = append(parts, "is busy with a background save and an AOF rewrite")
	case p.Obs.Saving:
		parts = append(parts, "is busy with a background save")
	case p.Obs.Rewriting:
		parts = append(parts, "is busy with an AOF rewrite")
	}
	if stalled {
		parts = append(parts, "stalled an earlier attempt")
	}
	if len(parts) == 0 {
		return "is idle"
	}
	return strings.Join(parts, " and ")
}
