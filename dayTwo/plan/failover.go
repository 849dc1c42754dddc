package plan

import (
	"fmt"
	"sort"
	"time"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

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
//     still), whether it answers now or was heard since the old master
//     fell silent (heardSinceSilent);
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
		// The chosen pod died too: choose again, still away from the old
		// master; once it has missed a look that waited the whole
		// timeout. A target on a loaded node that only missed its
		// periodic probes is kept: choosing again costs a status write
		// (1.2-1.9 s each on a loaded API server), and a target promoted
		// then taken for down is fenced again.
		look := lookBeforeJudging(s, target,
			fmt.Sprintf("failover target %s has not answered for more than %s: a look that waits %s before choosing another", to, s.ProbeTimeout, s.ProbeTimeout),
			fmt.Sprintf("a look at failover target %s waits up to %s before choosing another", to, s.ProbeTimeout))
		if look.Type != ActionNone {
			return look
		}
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
	if !Healthy(target) && !promotedAndSlow(s, target) {
		// The steps before the promotion need a fresh answer, and a
		// look that waits the whole timeout gets one from a live pod on
		// a loaded node, rather than waiting for the target to be down
		// first (a timeout more).
		if target.Obs.Slow {
			look := lookBeforeJudging(s, target,
				fmt.Sprintf("failover target %s only ran out of time since it answered: a look that waits %s for the next step", to, s.ProbeTimeout),
				fmt.Sprintf("a look at failover target %s waits up to %s for the next step", to, s.ProbeTimeout))
			if look.Type != ActionNone {
				return look
			}
		}
		return Action{Type: ActionWait, Pod: to, Reason: "waiting for the failover target to answer"}
	}
	if !Healthy(target) {
		a := afterPromotion(s, target)
		note := "the promoted target missed its probes since it answered at " + target.Obs.LastSeen.UTC().Format("15:04:05.000")
		if a.Reason == "" {
			a.Reason = note
		} else {
			a.Reason += " (" + note + ")"
		}
		return a
	}
	if target.Obs.Role == "master" {
		return afterPromotion(s, target)
	}
	// 2. Detach the other replicas: they follow the target.
	// The offsets stand still while the old master does not answer, or
	// answers as the replica it restarted as (it takes no writes).
	old, _ := s.Pod(from)
	if !Healthy(old) || StartedAsReplica(old) {
		if stale := probedBefore(s, op.StartedAt.Time, from, target); len(stale) > 0 {
			return Action{Type: ActionRefresh, Pods: stale, Reason: "failover: read the offsets again before choosing whom to detach and promote"}
		}
		m, _ := s.Pod(s.CurrentMaster)
		judged := silentSince(s, m)
		for _, p := range SortedPods(s) {
			if (detachable(s, p, from, target) || (p.Name != to && heardSinceSilent(s, m, judged, p))) && moreHistory(p, target) {
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

// afterPromotion plans steps 4 to 7 of planFailover, on what the promoted
// target answered last.
func afterPromotion(s Snapshot, target PodState) Action {
	from, to := s.Operation.FromPod, s.Operation.ToPod
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

// promotedAndSlow: the failover target answered as master since the
// failover started (it was promoted), and its probes since then only ran
// out of time, for less than the probe timeout (it is not down). On a
// loaded node a live pod misses its periodic probes (they wait half the
// timeout) between answers; waiting for its next answer held the steps
// after the promotion (docs/scale.md, run 25: labelled 6.5 s after it).
// Those steps (fence, label, repoint, complete) change other pods or
// labels, and go on with what it answered last. The steps before the
// promotion wait for a fresh answer: they compare the target's offset with
// the other replicas', and an old offset beside fresh ones (an old master
// streaming again before it answers) would choose another target while
// the old master can still reach this one. A target that refused a probe
// (killed) is waited for, and judged once it is down.
func promotedAndSlow(s Snapshot, p PodState) bool {
	return p.Observed && !p.Deleting && !p.Obs.Reachable && !p.Obs.Loading && p.Obs.Slow && p.Obs.Role == "master" &&
		s.Operation != nil && p.Obs.LastSeen.After(s.Operation.StartedAt.Time) && !s.down(p.Name)
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
func moreHistory(p, t PodState) bool {
	if (p.Obs.Keys > 0) != (t.Obs.Keys > 0) {
		return p.Obs.Keys > 0
	}
	return p.Obs.Offset > t.Obs.Offset
}

// chooseCandidate picks the replica to promote: reachable and not
// loading, or heard since the master fell silent (heardSinceSilent); not
// excluded; the highest replication offset; never an empty dataset while
// another candidate has data; ties to a replica that answers now, then to
// the lowest ordinal.
func chooseCandidate(s Snapshot, exclude ...string) (string, string) {
	skip := map[string]bool{}
	for _, e := range exclude {
		skip[e] = true
	}
	m, _ := s.Pod(s.CurrentMaster)
	judged := silentSince(s, m)
	var cands []PodState
	anyData := false
	for _, p := range s.Pods {
		if skip[p.Name] || !(Healthy(p) || heardSinceSilent(s, m, judged, p)) {
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
		if Healthy(a) != Healthy(b) {
			return Healthy(a)
		}
		return a.Ordinal() < b.Ordinal()
	})
	return cands[0].Name, ""
}

// heardSinceSilent: replica p does not answer now, but last answered
// after the recorded master m was judged (at judged, from silentSince;
// never while judged is zero), as a replica of it
// with its link down, not loading, and has only run out of time since (it
// refused nothing, and missed no probe that waited the whole timeout). It
// received nothing from the master after that answer, and with the master
// silent it receives nothing more: what the answer showed is what it
// holds. So it is compared with the replicas that answer now when a
// failover target is chosen, and is not looked at again. (Only replicas
// whose latest probe answered were compared before: one that alone
// acknowledged the last writes but missed a periodic probe on a loaded
// node was left out, then resynchronised in full from a target that lacks
// them.) An answer from before the master was judged is not enough: a
// master slow on a loaded node may still stream to the replica then. A
// replica whose link was up still received the stream of a master alive
// to it: its answer is not final, and it is not a target on that answer
// (in the scale benchmark's run 30, without this condition, 174 of 434
// failovers started chose such a replica, mostly of masters that were
// only slow, and each step waited for a look at the target: the fleet's
// p50 went from 2.76× to 7.48× the lone cluster's). A replica repointed
// to a failover target follows another pod, and is not heard here.
func heardSinceSilent(s Snapshot, m PodState, judged time.Time, p PodState) bool {
	return !judged.IsZero() && p.Name != m.Name && p.Observed && !p.Deleting && !p.Obs.Reachable && !p.Obs.Loading &&
		p.Obs.LastSeen.After(judged) && p.Obs.Role == "slave" && !p.Obs.MasterLinkUp && followed(p, m, s.MasterAddress) &&
		p.Obs.Slow && p.Obs.MissedWait < s.ProbeTimeout
}

// silentSince is when the probe was sent that the master m missed after
// waiting the whole probe timeout (or refused: a refusal counts its whole
// deadline), after its last answer: the time from which it is judged
// down (lookBeforeJudging). It is zero while m answers, has not missed
// such a probe, or is gone: a pod that is gone has no time to compare
// with, and only the replicas that answer now are heard.
func silentSince(s Snapshot, m PodState) time.Time {
	if m.Name == "" || !m.Observed || m.Deleting || m.Obs.Reachable || m.Obs.MissedWait < s.ProbeTimeout || !m.Obs.MissedWaitSent.After(m.Obs.LastSeen) {
		return time.Time{}
	}
	return m.Obs.MissedWaitSent
}

func bestOf(s Snapshot, exclude string) string {
	c, _ := chooseCandidate(s, exclude)
	return c
}

// followed: replica p follows master m, at m's address now or at the
// address m served writes at before its pod came back with another IP
// (recorded, status.currentMasterAddress). A peer's report of an address
// is trusted only against what the operator recorded itself.
func followed(p, m PodState, recorded string) bool {
	return p.Obs.MasterHost == m.IP || (recorded != "" && p.Obs.MasterHost == recorded)
}

// lacksHistory says why the master m lacks writes that the replica p,
// not in sync with it, holds; "" when it does not (or cannot be told).
//   - Same history (replication ID), p further along: m restarted from a
//     shorter copy of its own history.
//   - Unrelated histories (p's ID is neither m's nor the one m continued
//     from), p following m (at its address, or at the recorded one if m's
//     pod came back with another IP) and holding data, and m's run younger
//     than p's lost link: m restarted with a new history after p last
//     heard from it. m cannot prove it holds p's writes, and a full
//     resynchronisation from m would replace them. Unless m was promoted
//     holding at least p's offset (second_repl_offset beyond it): offsets
//     run on across failovers, so m is a pod that restarted, resynchronised
//     from a later master and was made master by a failover, while p, left
//     behind, still holds an older part of the same stream (seen in the
//     fleet benchmark: a replica that had not linked to the master of one
//     failover when the next one came).
//
// A replica whose history m continued (m's second ID) but went further
// is not counted: that is an old master fenced after a failover, whose
// extra writes no replica acknowledged.
func lacksHistory(m, p PodState, recorded string) string {
	// A master that runs as a replica of nobody has been no replica's
	// sync source in its run (it refuses): what a replica that follows
	// its address holds came from a run before. Whether that replica has
	// noticed the run's end yet (a frozen replica that thaws answers
	// before it reads its closed link; a partitioned one notices after
	// repl-timeout) does not matter.
	ofNobody := StartedAsReplica(m) && followed(p, m, recorded)
	holds := p.Obs.Keys > 0 || p.Obs.Offset > 0
	if p.Name == m.Name || !Healthy(p) || p.Obs.Role != "slave" || (p.Obs.MasterLinkUp && !ofNobody) || m.Obs.ReplID == "" || p.Obs.ReplID == "" {
		return ""
	}
	switch {
	case p.Obs.ReplID == m.Obs.ReplID:
		if p.Obs.Offset > m.Obs.Offset {
			return fmt.Sprintf("offset %d > %d on the same replication ID", p.Obs.Offset, m.Obs.Offset)
		}
	case p.Obs.ReplID == m.Obs.ReplID2:
	case m.Obs.SecondReplOffset > p.Obs.Offset:
	case ofNobody && holds:
		return fmt.Sprintf("it runs as a replica of nobody since %s with a new replication ID, while %s holds offset %d of the history before",
			runStart(m.Obs).UTC().Format(time.TimeOnly), p.Name, p.Obs.Offset)
	case followed(p, m, recorded) && holds && startedSinceLinkLost(m, p):
		return fmt.Sprintf("its run started %s, a new replication ID, while %s lost its link at %s holding offset %d",
			runStart(m.Obs).UTC().Format(time.TimeOnly), p.Name, linkLost(p.Obs).UTC().Format(time.TimeOnly), p.Obs.Offset)
	}
	return ""
}

// startedSinceLinkLost: m's run started no earlier than replica p lost its
// link. Each is read from its own probe, taken at its own time (a master
// probed seconds after the replica has an uptime seconds longer), so the
// two are compared as times, not as ages. Redis counts both in whole
// seconds of its clock: either may be off by up to a second, so a run
// that started less than 2 s before the loss counts too.
func startedSinceLinkLost(m, p PodState) bool {
	if p.Obs.LinkDownSeconds < 0 {
		return false
	}
	return runStart(m.Obs).After(linkLost(p.Obs).Add(-2 * time.Second))
}

// linkLost is when a replica lost its link to its master, as its last
// probe tells.
func linkLost(o probe.Observation) time.Time {
	return o.ProbedAt.Add(-time.Duration(o.LinkDownSeconds) * time.Second)
}
