package plan

import (
	"fmt"
	"sort"
	"time"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// Next returns the next step towards: one master, recorded in the status
// and labelled; every other reachable pod a replica of it, labelled replica;
// a failed master replaced by the replica holding the most data. The rules
// are in the order they win: a recorded restore or failover continues; a
// lost dataset is reported; a dead master is failed over; a switchover
// owns the roles; a wedged pod is recreated; a master that lacks data
// replicas hold is failed over; a renewed certificate is loaded (tls.go);
// the roles converge; then spec changes (operations.go) and backups
// (backup.go).
func Next(s Snapshot) Action {
	if s.Sharded != nil {
		return planSharded(s)
	}
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
		return planMasterDown(s)
	}
	// A switchover in progress owns the roles until it ends.
	if InSwitchover(s.Operation) {
		return planSwitchover(s)
	}
	if a := planRecreate(s, master); a.Type != ActionNone {
		return a
	}
	if !Healthy(master) {
		return Action{Type: ActionWait, Pod: master.Name, Reason: "waiting for the master to answer", OnAnswer: true, Until: s.downAt(master)}
	}
	if a := planMasterLacksData(s, master); a.Type != ActionNone {
		return a
	}
	// A renewed certificate reaches the pods before the roles converge or
	// an operation moves on: it is one quick command per pod, and an
	// expiring certificate stops replication and clients.
	if a := planTLS(s); a.Type != ActionNone {
		return a
	}
	if a := planRoles(s, master); a.Type != ActionNone {
		return a
	}
	return planOperations(s)
}

// planMasterDown fails a dead master over to the best replica.
func planMasterDown(s Snapshot) Action {
	if !s.AutoFailover {
		return Action{Type: ActionWait, Pod: s.CurrentMaster, Reason: "master is down and automatic failover is off", OnAnswer: true}
	}
	cand, why := chooseCandidate(s, s.CurrentMaster)
	m, _ := s.Pod(s.CurrentMaster)
	if cand == "" {
		if look := replicaLooks(s, m, false); look.Type != ActionNone {
			return look
		}
		return Action{Type: ActionWait, Pod: s.CurrentMaster, Reason: "master is down and no replica can take over: " + why, OnAnswer: true}
	}
	look := lookBeforeJudging(s, m,
		fmt.Sprintf("master %s has not answered for more than %s: a last look that waits %s before failing over", m.Name, s.ProbeTimeout, s.ProbeTimeout),
		fmt.Sprintf("a last look at master %s waits up to %s before failing over", m.Name, s.ProbeTimeout))
	if look.Type != ActionNone {
		return look
	}
	if look := heardByReplicas(s, m); look.Type != ActionNone {
		return look
	}
	if look := replicaLooks(s, m, true); look.Type != ActionNone {
		return look
	}
	reason := fmt.Sprintf("master %s unreachable for more than %s", s.CurrentMaster, s.ProbeTimeout)
	if c, _ := s.Pod(cand); !Healthy(c) {
		reason += fmt.Sprintf("; %s holds the most of the stream, as it answered at %s, after the master fell silent", cand, c.Obs.LastSeen.UTC().Format("15:04:05.000"))
	}
	return Action{Type: ActionStartFailover, Pod: cand, Master: s.CurrentMaster, Reason: reason}
}

// aliveGraceTimeouts is for how many probe timeouts since a master last
// answered the operator it is looked at again, not failed over, while its
// replicas still hear from it (heardByReplicas).
const aliveGraceTimeouts = 4

// heardByReplicas keeps a master that its replicas still hear from out of
// a failover, for a while. The master missed a look that waited the whole
// probe timeout (it is judged from when that look was sent, silentSince),
// yet a replica that follows it, with its link up, answers that it read
// something from the master after that: the master is alive, to its
// replicas at least, and what is slow is the operator's way to it (a
// loaded node, a congested path). It gets another look that waits the
// whole timeout; an answer ends the wait (the MasterSlow Event of any look
// answered), a silence judges it again, from the new look.
//
// The replica tells when it last read from its master
// (master_last_io_seconds_ago, whole seconds of its clock: one more is
// taken off, and the probe was sent before the replica counted). A killed
// master never counts: its replicas' links drop with it. Nor an idle one
// between its pings to its replicas (repl-ping-replica-period, 10 s by
// default): only a master that writes, or pings, since it was judged
// shows itself alive. A frozen one counts at most once a look: the
// replica may read the master's last bytes late (its own node stalled, or
// the master froze while the look waited), but a master that sends
// nothing cannot show itself alive after the next look is sent. At
// probeTimeoutSeconds 1 the rule can hardly fire: the replica's word has
// to come from a probe sent more than a second after the master's look,
// which has ended by then.
//
// A look in flight is waited for. For at most aliveGraceTimeouts probe
// timeouts since the master last answered the operator (or, not heard
// since the operator started, since its probes began to fail), no
// further look is sent: a master cut off from the operator, and perhaps
// from its clients, but not from its replicas, is then failed over all
// the same.
func heardByReplicas(s Snapshot, m PodState) Action {
	judged := silentSince(s, m)
	if judged.IsZero() {
		return Action{Type: ActionNone}
	}
	if !m.Obs.LookingSince.IsZero() {
		// Only this rule sends a look at a master already judged; it
		// ends within the timeout, and a failover started while it is
		// in flight would be reported averted if it answered.
		return waitForLook(s, m, fmt.Sprintf("its replicas hear from master %s: a look at it waits up to %s before failing over", m.Name, s.ProbeTimeout))
	}
	if s.Now.Sub(silentFrom(m)) > aliveGraceTimeouts*s.ProbeTimeout {
		return Action{Type: ActionNone}
	}
	at, by := replicasHeard(s, m)
	if !at.After(judged) {
		return Action{Type: ActionNone}
	}
	why := fmt.Sprintf("master %s missed a look that waited %s, sent at %s, but replica %s heard from it at %s or later, with its link up: "+
		"it is alive to its replicas; another look before failing over (for up to %s since it last answered)",
		m.Name, s.ProbeTimeout, judged.UTC().Format("15:04:05.000"), by, at.UTC().Format("15:04:05.000"), aliveGraceTimeouts*s.ProbeTimeout)
	return Action{Type: ActionLastLook, Pod: m.Name, Reason: why, MasterSlow: true}
}

// replicasHeard is the latest time at which a replica that answers now,
// follows master m at m's address and has its link up, tells it heard
// from m, at the earliest that can have been; and that replica. Zero when
// none does. A replica of the address m served at before its pod came
// back with another one (followed's recorded address) hears another
// process, or another pod that took the address, never m.
func replicasHeard(s Snapshot, m PodState) (time.Time, string) {
	var at time.Time
	by := ""
	for _, p := range SortedPods(s) {
		if p.Name == m.Name || !Healthy(p) || p.Obs.Role != "slave" || !p.Obs.MasterLinkUp || p.Obs.MasterLastIOSeconds < 0 || p.Obs.MasterHost != m.IP {
			continue
		}
		if t := p.Obs.ProbedAt.Add(-time.Duration(p.Obs.MasterLastIOSeconds+1) * time.Second); t.After(at) {
			at, by = t, p.Name
		}
	}
	return at, by
}

// replicaLooks hears every replica of the master before a failover
// target is chosen. The master is surely down: it refused a probe, or
// missed the look that waits the whole timeout, or is gone. A replica
// that follows it (or whose role is not known yet), does not answer now,
// whose missed probes only ran out of time, and that has not been heard
// since the master was judged (heardSinceSilent) gets one look that waits
// the whole timeout, as a failover target does; the looks go out
// together, and each wait ends with its look. The replica that answers
// first must not win over one still silent that may hold more of the
// stream: a write acknowledged by one replica is on that one only.
//
// With a candidate (once), a replica that answered since the master was
// judged is not looked at again, even when that answer cannot be compared
// (its link was up, or it was loading); the failover goes on with the
// replicas heard. With none, the looks go on while the master stays down:
// a replica that answers one may take over.
//
// On a loaded node live replicas miss their periodic probes (half the
// timeout) for many seconds: in the scale benchmark's run 26 a killed
// master's replicas did for 21 s, and the failover waited for them. The
// gate on the master matters: looks at silent replicas of masters that
// were only slow sent 8,069 looks in 25 minutes in run 24; with such a
// master only the looks in flight are waited for.
//
// It returns the first look to send, else the wait for one in flight,
// else ActionNone.
func replicaLooks(s Snapshot, m PodState, once bool) Action {
	send := m.Name == "" || m.Deleting || !m.Observed || !m.Obs.Slow || m.Obs.MissedWait >= s.ProbeTimeout
	judged := silentSince(s, m)
	wait := Action{Type: ActionNone}
	for _, p := range SortedPods(s) {
		if p.Name == m.Name || Healthy(p) || heardSinceSilent(s, m, judged, p) {
			continue
		}
		// Only a replica that ran out of time while the master is surely
		// down gets a new look; one in flight is waited for whatever the
		// master does.
		if !(send && p.Obs.Slow) && p.Obs.LookingSince.IsZero() {
			continue
		}
		// A replica of another pod is not looked at; one whose role is
		// not known yet (not heard since this operator started) is.
		if m.Name != "" && p.Obs.Role != "" && !followed(p, m, s.MasterAddress) {
			continue
		}
		// With a candidate, one that answered since the master was judged
		// is not looked at again.
		if once && !judged.IsZero() && p.Obs.LastSeen.After(judged) {
			continue
		}
		a := lookBeforeJudging(s, p,
			fmt.Sprintf("master %s is down and replica %s, which only ran out of time, has not been heard since: a look that waits %s", s.CurrentMaster, p.Name, s.ProbeTimeout),
			fmt.Sprintf("master %s is down: a look at replica %s waits up to %s, and is heard before a failover target is chosen", s.CurrentMaster, p.Name, s.ProbeTimeout))
		switch {
		case a.Type == ActionLastLook:
			return a
		case a.Type == ActionWait && wait.Type == ActionNone:
			wait = a
		}
	}
	return wait
}

// lookBeforeJudging is the look a pod that does not answer gets before it
// is judged down: the master before a failover, the failover's target
// before another is chosen.
// The periodic probes wait two probe periods for an answer (half the
// timeout, at most 4 s): a pod that answers within the timeout, only
// slower (a loaded node), misses every one of them. One look that waits
// the whole timeout tells slow from down before the roles move; a dead
// process refuses it at once. It runs in the background (LastLook), so a
// worker does not wait the timeout out, and its end wakes the controller.
// It returns the look, the wait for the one in flight, or ActionNone for a
// pod that answers, is gone, or missed a probe that waited the whole
// timeout since it last answered.
func lookBeforeJudging(s Snapshot, p PodState, look, wait string) Action {
	if p.Deleting || !p.Observed || p.Obs.Reachable || p.Obs.MissedWait >= s.ProbeTimeout {
		return Action{Type: ActionNone}
	}
	if !p.Obs.LookingSince.IsZero() {
		return waitForLook(s, p, wait)
	}
	return Action{Type: ActionLastLook, Pod: p.Name, Reason: look}
}

// waitForLook waits for the look at p in flight: its end wakes the
// controller; the deadline is a fallback.
func waitForLook(s Snapshot, p PodState, reason string) Action {
	return Action{Type: ActionWait, Pod: p.Name, OnAnswer: true, Until: p.Obs.LookingSince.Add(s.ProbeTimeout + time.Second), Reason: reason}
}

// planRecreate recreates a pod stuck not-Ready (a wedged process, a lost
// volume mount); the master only after a failover moved the role away.
// During an upgrade the upgrade's deadline judges the pods instead.
func planRecreate(s Snapshot, master PodState) Action {
	if s.RecreateAfter <= 0 || (s.Operation != nil && s.Operation.Type == cachev1alpha1.OperationUpgrade) {
		return Action{Type: ActionNone}
	}
	for _, p := range SortedPods(s) {
		if p.Name != master.Name && !p.Deleting && !p.NotReadySince.IsZero() && s.Now.Sub(p.NotReadySince) > s.RecreateAfter {
			return Action{Type: ActionRecreate, Pod: p.Name, Reason: fmt.Sprintf("not Ready for more than %s", s.RecreateAfter)}
		}
	}
	return Action{Type: ActionNone}
}

// RecheckAt is the soonest time after Now at which the plan may change
// with the clock alone, nothing else changing; zero if none. The
// controller is woken when pods and their answers change, not when time
// passes: a pod that stays not Ready is recreated once RecreateAfter has
// passed (planRecreate), and is looked at again then; a password rotation
// of spec.users ends at UsersRecheckAt.
func RecheckAt(s Snapshot) time.Time {
	var at time.Time
	if t := s.UsersRecheckAt; t.After(s.Now) {
		// A rotation window ends: its previous password is removed then.
		at = t.Add(time.Millisecond)
	}
	if s.RecreateAfter <= 0 || (s.Operation != nil && s.Operation.Type == cachev1alpha1.OperationUpgrade) {
		return at
	}
	for _, p := range s.Pods {
		if p.Name == s.CurrentMaster || p.Deleting || p.NotReadySince.IsZero() {
			continue
		}
		// planRecreate asks for more than RecreateAfter.
		t := p.NotReadySince.Add(s.RecreateAfter + time.Millisecond)
		if t.After(s.Now) && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	return at
}

// planMasterLacksData fails over from a master that restarted without
// writes a replica holds: empty while replicas kept the data, or with a
// shorter history. Resynchronising from it, the replicas would drop them.
//
// A restarted process comes up as a replica of nobody (StartedAsReplica):
// it refuses to be a sync source until it is promoted, so the replicas keep
// their data while this is judged, and it is judged before the promotion.
// With automatic failover off the cluster waits, without a master, for a
// person: a Warning Event says what to do.
func planMasterLacksData(s Snapshot, master PodState) Action {
	if master.Obs.Role != "master" && !StartedAsReplica(master) {
		return Action{Type: ActionNone}
	}
	failover := func(reason, off string) Action {
		if s.AutoFailover {
			return Action{Type: ActionStartFailover, Pod: bestOf(s, master.Name), Master: master.Name, Reason: reason}
		}
		return Action{Type: ActionWait, Pod: master.Name, Alert: cachev1alpha1.EventMasterLacksData, OnAnswer: true,
			Reason: off + fmt.Sprintf("; the replicas keep their data and %s is not promoted: set spec.highAvailability.autoFailover: true to fail over to %s", master.Name, bestOf(s, master.Name))}
	}
	if master.Obs.Keys == 0 {
		for _, p := range s.Pods {
			if p.Name != master.Name && Healthy(p) && p.Obs.Keys > 0 && !(p.Obs.Role == "slave" && p.Obs.MasterHost == master.IP && p.Obs.MasterLinkUp) {
				return failover(fmt.Sprintf("master %s came back empty while replicas hold data", master.Name),
					"master came back empty while replicas hold data; automatic failover is off")
			}
		}
	}
	if StartedAsReplica(master) {
		if a := awaitWitnesses(s, master); a.Type != ActionNone {
			return a
		}
	}
	for _, p := range SortedPods(s) {
		if why := lacksHistory(master, p, s.MasterAddress); why != "" {
			if master.Obs.Role == "master" && master.Obs.ProbedAt.Before(p.Obs.ProbedAt) {
				// A master that serves writes is ahead of what an older
				// look at it says: compare on a look at the master taken
				// after the replica's (a replica just repointed reports
				// its offset at once, the master's is from its last probe).
				// One that came back as a replica of nobody serves none
				// and its offset stands still: looking again changes
				// nothing. (In the scale benchmark a killed master that
				// came back so was looked at again four times, a replica's
				// probe newer each time, before it was failed over, 3
				// minutes after the kill.) A pod promoted since is probed
				// again right after the Promote (refreshChanged), so its
				// role here is not the look from before the promotion.
				return Action{Type: ActionRefresh, Pods: []string{master.Name}, Reason: "read the master's offset again before comparing it with " + p.Name + "'s"}
			}
			return failover(fmt.Sprintf("master %s restarted with less history than %s: %s", master.Name, p.Name, why),
				fmt.Sprintf("master %s restarted with less history than %s (%s); automatic failover is off", master.Name, p.Name, why))
		}
	}
	return Action{Type: ActionNone}
}

// awaitWitnesses holds the judgement of a master that came back as a
// replica of nobody until each replica that may hold writes it lacks has
// been looked at since its restart. lacksHistory compares a replica only
// as its last probe saw it: a look from before the restart shows the link
// up, and a replica that missed its probes is not compared at all; either
// way the master would be promoted, and its replicas, refused a partial
// resynchronisation by its new history, would resynchronise in full and
// drop what it lacks. (Seen in the scale benchmark, 300 clusters at load
// 37: a restarted master was promoted 5 s after the kill and failed over
// only at the next look; Redis's 5 s diskless-sync delay alone kept the
// replicas' data.)
//
//   - A replica that answered, probed before the restart, is probed again
//     (Refresh).
//   - One whose look since shows its link to the master's address up has
//     not noticed the restart yet (a frozen replica that thaws answers
//     before it reads its closed link): it is judged all the same, as
//     what it holds came from a run before (lacksHistory).
//   - One that does not answer gets one look, sent after the master's
//     start, that waits the whole probe timeout, as a master does before
//     a failover (in the background, so no worker waits; a Refresh of a
//     stale look that waited as long counts too): a replica slow on a
//     loaded node is judged, one that misses that look too is down and
//     does not keep the cluster without a master.
//   - One with an address not probed yet is waited for: its first probe
//     is recorded within that probe's deadline, answered or not (each
//     pod is probed on its own clock, so after an operator restart the
//     master's first answer can come before a replica's, long after the
//     master's start). One without an address is waited for the probe
//     timeout after the master's start; one loading a dataset for the
//     step deadline.
//
// A first master is judged alike: Bootstrap records it before it is
// promoted (once every pod with an address has been probed), and a pod
// not probed yet is waited for as above (26 such waits among 300 new
// clusters in the scale benchmark's run 13, on the round-based prober).
func awaitWitnesses(s Snapshot, m PodState) Action {
	started := latestRunStart(m.Obs)
	var stale []string
	look, wait := Action{Type: ActionNone}, Action{Type: ActionNone}
	waitFor := func(p PodState, until time.Time, why string) {
		if wait.Type == ActionNone && s.Now.Before(until) {
			wait = Action{Type: ActionWait, Pod: p.Name, OnAnswer: true, Until: until,
				Reason: fmt.Sprintf("master %s runs as a replica of nobody, not promoted yet: %s before judging what it lacks", m.Name, why)}
		}
	}
	for _, p := range SortedPods(s) {
		if p.Name == m.Name || p.Deleting {
			continue
		}
		if p.Observed && p.Obs.Role != "" && (StartedAsReplica(p) || !(followed(p, m, s.MasterAddress) || (p.Obs.ReplID != "" && p.Obs.ReplID == m.Obs.ReplID))) {
			// Restarted too, or a replica of another history: the
			// comparison can find nothing of this master's in it (a
			// replica that restarted too may hold writes of its own in
			// its append-only file; they cannot be compared, and it
			// follows the master once promoted). A pod that has not
			// answered since this operator started (no role known) is
			// not skipped: it is looked at.
			continue
		}
		switch {
		case !p.Observed && p.IP != "" && wait.Type == ActionNone:
			// Each pod is probed on its own clock: the master's first
			// answer (after an operator restart, a master restarted
			// long before) can come before a replica's, and its start
			// plus the timeout may be long past. The replica's first
			// probe is recorded within its deadline, answered or not.
			wait = Action{Type: ActionWait, Pod: p.Name, OnAnswer: true,
				Reason: fmt.Sprintf("master %s runs as a replica of nobody, not promoted yet: %s has not been probed yet, waiting for its first probe", m.Name, p.Name)}
		case !p.Observed:
			waitFor(p, started.Add(s.ProbeTimeout), p.Name+" has not been probed yet: waiting for its answer")
		case Healthy(p) && p.Obs.ProbedAt.Before(started):
			stale = append(stale, p.Name)
		case Healthy(p):
			// Judged as it answered (lacksHistory), whether or not it
			// has noticed yet that the run it followed ended.
		case p.Obs.Reachable:
			waitFor(p, started.Add(s.StepDeadline), p.Name+" is loading its dataset: waiting for it")
		case !p.Obs.LookingSince.IsZero():
			waitFor(p, p.Obs.LookingSince.Add(s.ProbeTimeout+time.Second), fmt.Sprintf("a look at %s waits up to %s", p.Name, s.ProbeTimeout))
		case (p.Obs.MissedWait < s.ProbeTimeout || p.Obs.MissedWaitSent.Before(started)) && look.Type == ActionNone:
			// No probe sent since the master's start has waited the
			// whole timeout for it.
			look = Action{Type: ActionLastLook, Pod: p.Name,
				Reason: fmt.Sprintf("master %s runs as a replica of nobody, not promoted yet, and %s does not answer: a look that waits %s before judging what the master lacks", m.Name, p.Name, s.ProbeTimeout)}
		}
	}
	switch {
	case len(stale) > 0:
		return Action{Type: ActionRefresh, Pods: stale, Reason: fmt.Sprintf("master %s runs as a replica of nobody, not promoted yet: look at its replicas again before judging what it lacks", m.Name)}
	case look.Type != ActionNone:
		return look
	}
	return wait
}

// runStart is when the pod's redis-server started, as its last answer
// tells: to the second, as Redis reports its uptime, and counted from
// when the answer came (a slow answer makes the start later, not
// earlier: a replica's look must then be newer, and a run that began
// after the replica lost its link is never taken for an older one).
func runStart(o probe.Observation) time.Time {
	return answeredAt(o).Add(-time.Duration(o.UptimeSeconds) * time.Second)
}

// answeredAt is when the pod's last answer came (no earlier than the
// probe was sent).
func answeredAt(o probe.Observation) time.Time {
	if o.LastSeen.IsZero() || o.LastSeen.Before(o.ProbedAt) {
		return o.ProbedAt
	}
	return o.LastSeen
}

// latestRunStart is the latest the pod's redis-server can have started,
// as its last answer tells. Redis counts its uptime in whole seconds of its
// clock, so the run may have begun up to a second after runStart; never
// after the answer. A replica's look counts as taken since a master's
// restart only after this: one taken in that second may predate the
// restart. (Seen in TestIntegrationARestartedMasterIsJudgedOnItsReplicas…:
// the master answered with an uptime of 2 s, 1.5 s after its replicas'
// last answers, sent before they were frozen and it was killed; those
// looks counted as taken since its start, it was promoted, and the
// replicas, resynchronised from it, dropped 64 acknowledged writes. Probed
// in rounds, all the pods' answers had come together.)
func latestRunStart(o probe.Observation) time.Time {
	if o.UptimeSeconds > 1 {
		return runStart(o).Add(time.Second)
	}
	return answeredAt(o)
}

// planRoles makes the recorded master the only master, in Redis and in
// the labels; a restored cluster is checked before the master label lets
// clients write to it.
func planRoles(s Snapshot, master PodState) Action {
	// Never two master labels: take it off every other pod first, before
	// anything is promoted.
	for _, p := range s.Pods {
		if p.Name != master.Name && p.RoleLabel == cachev1alpha1.RoleMaster {
			return Action{Type: ActionUnlabel, Pod: p.Name, Reason: "only " + master.Name + " may carry the master label"}
		}
	}
	if master.Obs.Role != "master" {
		return Action{Type: ActionPromote, Pod: master.Name, Reason: "the recorded master is a replica in Redis"}
	}
	if s.RestorePending {
		return Action{Type: ActionVerifyRestore, Pod: master.Name, Reason: "compare the restored keys with the backup's metadata"}
	}
	return converge(s, master)
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

// planBootstrap chooses the first master: the reachable pod with the most
// data (so a cluster whose status was lost never promotes an empty pod over
// a full one), then the lowest ordinal. It is chosen among every pod that
// has an address, once each has been probed: pods are probed each on its
// own clock, and the first to answer is not the one with the most data
// just because it answered first. A pod that does not answer its first
// probe is judged unreachable within that probe's deadline and does not
// hold the choice back; one without an address yet is not waited for.
func planBootstrap(s Snapshot) Action {
	var ready []PodState
	for _, p := range SortedPods(s) {
		if p.IP != "" && !p.Deleting && !p.Observed {
			return Action{Type: ActionWait, Pod: p.Name, OnAnswer: true,
				Reason: p.Name + " has not been probed yet: the first master is chosen among every pod's answer"}
		}
		if Healthy(p) {
			ready = append(ready, p)
		}
	}
	if len(ready) == 0 {
		return Action{Type: ActionWait, Reason: "no pod answers yet", OnAnswer: true}
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
