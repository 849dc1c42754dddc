package plan

import (
	"fmt"
	"strings"
	"time"
)

// The data check after a restart: a replica that came back ready and in
// sync must also hold what the master holds, read, not inferred from its
// link status. The executor samples keys on the master (RANDOMKEY, in one
// MULTI with the master's offset), waits until the replica reached that
// offset, and reads the keys there (EXISTS). A key the replica lacks is
// looked up on the master again, at a new offset the replica then reaches:
// one the master no longer holds was deleted or expired in between and is
// not counted; one the master still holds and the replica still lacks is a
// mismatch. The planner asks for a check of each replica on the target
// template, once per run of its server (RunID) and master, before the next
// pod restarts and before the operation completes; a mismatch stops the
// rollout there (a Wait that says why, and a DataCheckFailed Event).

// DataCheck is what a data check of one replica found.
type DataCheck struct {
	// RunID is the replica's run_id when it was checked: a restarted
	// server is checked again.
	RunID string
	// Master is the pod the keys were sampled on.
	Master string
	// Offset is the master's offset at sample time.
	Offset int64
	// Sampled counts the distinct keys sampled; Dropped those the master
	// deleted or expired before they could be compared.
	Sampled, Dropped int
	// Missing are keys the master held at both looks that the replica
	// lacked at both.
	Missing []string
	// Err says why the check could not be made (then it is made again).
	Err string
	At  time.Time
}

// dataCheckRetry is how long a check that could not be made waits before
// it is made again.
const dataCheckRetry = 2 * time.Second

// planDataCheck asks for the data check of the first replica on the target
// template (checked tells which) that has none for its current run and
// master, or stops the rollout at one whose check found keys missing. ok is
// false when every such replica passed.
func planDataCheck(s Snapshot, master PodState, checked func(PodState) bool) (Action, bool) {
	for _, p := range SortedPods(s) {
		if p.Name == master.Name || p.Deleting || !checked(p) || p.Obs.Role != "slave" {
			continue
		}
		dc, ok := s.DataChecks[p.Name]
		switch {
		case !ok || dc.RunID != p.Obs.RunID || dc.Master != master.Name:
			return Action{Type: ActionCheckData, Pod: p.Name, Master: master.Name,
				Reason: fmt.Sprintf("check that %s holds a sample of the keys %s holds", p.Name, master.Name)}, true
		case dc.Err != "" && s.Now.Sub(dc.At) >= dataCheckRetry:
			return Action{Type: ActionCheckData, Pod: p.Name, Master: master.Name,
				Reason: fmt.Sprintf("check that %s holds a sample of the keys %s holds (the last check failed: %s)", p.Name, master.Name, dc.Err)}, true
		case dc.Err != "":
			return Action{Type: ActionWait, Pod: p.Name, Reason: fmt.Sprintf("the data check of %s failed (%s); trying again", p.Name, dc.Err)}, true
		case len(dc.Missing) > 0:
			return Action{Type: ActionWait, Pod: p.Name, Reason: DescribeMismatch(p.Name, dc)}, true
		}
	}
	return Action{}, false
}

// DescribeMismatch says what a failed data check found and what to do.
func DescribeMismatch(pod string, dc DataCheck) string {
	keys := dc.Missing
	more := ""
	if len(keys) > 5 {
		keys, more = keys[:5], fmt.Sprintf(" and %d more", len(dc.Missing)-5)
	}
	return fmt.Sprintf("%s lacks %d of the %d keys sampled on the master %s (%s%s), which the master still holds after %s reached its offset %d; "+
		"the rollout stops here: no other pod restarts until %s's server restarts (it is checked again then). "+
		"Compare the two pods (kubectl cache status), and resync %s from the master by deleting the pod and its volume claim",
		pod, len(dc.Missing), dc.Sampled, dc.Master, strings.Join(keys, ", "), more, pod, dc.Offset, pod, pod)
}
