package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// ackers lists the pods that could acknowledge a write (WAIT 1) other than
// the target: a Redis master with a replica attached. A master that does
// not answer counts too: a frozen one answers when it thaws, with the
// replicas still pointed at it. The old master whose only replica is the
// target, before the target's promotion, does not count: every write it
// gets acknowledged is on the target, which keeps it.
func ackers(s Snapshot, from, target string) []string {
	t, _ := s.Pod(target)
	var out []string
	for _, m := range s.Pods {
		if m.Name == target || m.Obs.Role != "master" {
			continue
		}
		var replicas []string
		for _, p := range s.Pods {
			if p.Name != m.Name && p.Obs.Role == "slave" && p.Obs.MasterHost == m.IP {
				replicas = append(replicas, p.Name)
			}
		}
		if len(replicas) == 0 {
			continue
		}
		if m.Name == from && len(replicas) == 1 && replicas[0] == target && t.Obs.Role == "slave" {
			continue
		}
		out = append(out, fmt.Sprintf("%s (replicas %v)", m.Name, replicas))
	}
	return out
}

// foWorld is a cluster whose master froze: pods answer at once and every
// step succeeds, as in Simulate, with the old master thawing at a chosen
// step.
type foWorld struct {
	s Snapshot
	// slow: pods that miss their periodic probes but answer a look.
	slow map[string]bool
}

func newFoWorld(offsets []int64) *foWorld {
	ips := []string{ip0, ip1, ip2, ip3, ip4}
	var pods []PodState
	for i, off := range offsets {
		name := fmt.Sprintf("c-%d", i)
		if i == 0 {
			pods = append(pods, down(pod(name, ips[i], "master", "", "master", off, 10), 2*time.Second))
			continue
		}
		pods = append(pods, pod(name, ips[i], "slave", ip0, "replica", off, 10))
	}
	return &foWorld{s: steady(Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: pods, StepDeadline: time.Minute})}
}

func (w *foWorld) set(name string, f func(*PodState)) {
	for i := range w.s.Pods {
		if w.s.Pods[i].Name == name {
			f(&w.s.Pods[i])
		}
	}
}

func (w *foWorld) thaw(name string) {
	w.set(name, func(p *PodState) { p.Obs.Reachable, p.Obs.LastSeen = true, w.s.Now })
}

// apply takes a step; it returns an error when the step would lose data
// a replica holds: a pod other than the old master made to follow a pod
// with less of the stream (a full resynchronisation), or the target
// itself made a replica.
func (w *foWorld) apply(a Action) error {
	s := &w.s
	switch a.Type {
	case ActionStartFailover:
		op := failoverOp(a.Master, a.Pod)
		if s.Operation != nil {
			op.ID, op.StartedAt = s.Operation.ID, s.Operation.StartedAt
		}
		s.Operation = op
	case ActionRefresh:
		for _, name := range a.Pods {
			w.set(name, func(p *PodState) { p.Obs.ProbedAt = s.Now })
		}
	case ActionLastLook:
		w.set(a.Pod, func(p *PodState) {
			p.Obs.ProbedAt = s.Now
			if w.slow[p.Name] {
				p.Obs.Reachable, p.Obs.LastSeen, p.Obs.MissedWait = true, s.Now, 0
				return
			}
			if !p.Obs.Reachable {
				// A frozen pod keeps the look waiting its whole deadline.
				p.Obs.MissedWait = max(p.Obs.MissedWait, s.ProbeTimeout)
			}
		})
	case ActionUnlabel, ActionLabelMaster, ActionLabelReplica, ActionPromote:
		applyRoleStep(s, a)
	case ActionRepoint, ActionFence:
		m, _ := s.Pod(a.Master)
		p, _ := s.Pod(a.Pod)
		if s.Operation != nil && a.Pod == s.Operation.ToPod {
			return fmt.Errorf("%s: the failover target is made a replica", a)
		}
		oldMaster := s.Operation != nil && a.Pod == s.Operation.FromPod || s.Operation == nil && a.Type == ActionFence
		if !oldMaster && moreHistory(p, m) {
			return fmt.Errorf("%s: %s (offset %d) would resynchronise in full from %s (offset %d)", a, p.Name, p.Obs.Offset, m.Name, m.Obs.Offset)
		}
		w.set(a.Pod, func(p *PodState) {
			p.Obs.Role, p.Obs.MasterHost, p.Obs.MasterLinkUp = "slave", m.IP, true
			p.Obs.Offset = min(p.Obs.Offset, m.Obs.Offset)
		})
	case ActionCompleteFailover:
		s.CurrentMaster, s.Operation = a.Pod, nil
	default:
		return fmt.Errorf("%s: not a step of a failover", a)
	}
	s.Now = s.Now.Add(10 * time.Millisecond)
	return nil
}

// TestFailoverOrderLeavesOnlyTheTargetToAcknowledge plays failovers of a
// frozen master, the old master thawing before, at every step of, or
// after the failover (or never), and checks the invariant of
// docs/failover.md after every step: before the promotion only unlabelling
// and detaching happen; from the promotion on (and in the state the
// promotion is planned on) no pod but the target can acknowledge a write;
// no replica is made to follow a pod with less of the stream; never two
// master labels; in the end one master, labelled, every other pod its
// replica.
func TestFailoverOrderLeavesOnlyTheTargetToAcknowledge(t *testing.T) {
	clusters := []struct {
		name    string
		offsets []int64 // c-0 is the old master
		want    string  // the new master
	}{
		{"3 pods", []int64{120, 110, 100}, "c-1"},
		{"3 pods, the higher ordinal holds more", []int64{120, 100, 110}, "c-2"},
		{"5 pods", []int64{120, 100, 115, 110, 115}, "c-2"},
	}
	for _, c := range clusters {
		for thawAt := -1; thawAt < 12; thawAt++ {
			t.Run(fmt.Sprintf("%s, old master thaws at step %d", c.name, thawAt), func(t *testing.T) {
				w := newFoWorld(c.offsets)
				promoted := false
				var steps []string
				for i := 0; ; i++ {
					if i == thawAt {
						w.thaw("c-0")
					}
					if i > 60 {
						t.Fatalf("no convergence after %d steps: %v", i, steps)
					}
					a := Next(w.s)
					if again := Next(w.s); again.String() != a.String() {
						t.Fatalf("step %d: the plan is not a function of the snapshot: %s, then %s", i, a, again)
					}
					if a.Type == ActionNone {
						break
					}
					if a.Type == ActionWait {
						t.Fatalf("step %d: %s (after %v)", i, a, steps)
					}
					steps = append(steps, a.String())
					op := w.s.Operation
					if op != nil && !promoted {
						switch {
						case a.Type == ActionPromote:
							if got := ackers(w.s, op.FromPod, a.Pod); len(got) > 0 {
								t.Fatalf("step %d: promotion planned while %v can acknowledge writes (steps %v)", i, got, steps)
							}
							promoted = true
						case a.Type == ActionUnlabel, a.Type == ActionStartFailover, a.Type == ActionRepoint && a.Master == op.ToPod:
						default:
							t.Fatalf("step %d: %s before the promotion (steps %v)", i, a, steps)
						}
					}
					from, to := "c-0", ""
					if op != nil {
						from, to = op.FromPod, op.ToPod
					}
					if err := w.apply(a); err != nil {
						t.Fatalf("step %d: %v (steps %v)", i, err, steps)
					}
					if w.s.Operation != nil {
						to = w.s.Operation.ToPod
					} else if to == "" {
						to = w.s.CurrentMaster
					}
					if promoted {
						if got := ackers(w.s, from, to); len(got) > 0 {
							t.Fatalf("after step %d (%s): %v can acknowledge writes besides %s (steps %v)", i, a, got, to, steps)
						}
					}
					labels := 0
					for _, p := range w.s.Pods {
						if p.RoleLabel == cachev1alpha1.RoleMaster {
							labels++
						}
					}
					if labels > 1 {
						t.Fatalf("after step %d: %d pods labelled master", i, labels)
					}
				}
				if thawAt == 0 {
					// Back before the failover started: none starts.
					if len(steps) > 0 || w.s.CurrentMaster != "c-0" {
						t.Fatalf("the master came back in time, yet: %v", steps)
					}
					return
				}
				if !promoted {
					t.Fatalf("no promotion: %v", steps)
				}
				if w.s.CurrentMaster != c.want {
					t.Fatalf("new master %s, want %s (steps %v)", w.s.CurrentMaster, c.want, steps)
				}
				m, _ := w.s.Pod(w.s.CurrentMaster)
				for _, p := range w.s.Pods {
					switch {
					case p.Name == m.Name:
						if p.Obs.Role != "master" || p.RoleLabel != cachev1alpha1.RoleMaster {
							t.Fatalf("the new master %s: role %s, label %q", p.Name, p.Obs.Role, p.RoleLabel)
						}
					case p.Obs.Reachable:
						if p.Obs.Role != "slave" || p.Obs.MasterHost != m.IP || p.RoleLabel != cachev1alpha1.RoleReplica {
							t.Fatalf("%s: role %s of %s, label %q; want a replica of %s (steps %v)", p.Name, p.Obs.Role, p.Obs.MasterHost, p.RoleLabel, m.Name, steps)
						}
					}
				}
			})
		}
	}
}

// TestAFailoverTargetThatMissesItsProbesIsLookedAtFirst: at each step of
// a failover, its target stops answering its periodic probes (they wait
// half the timeout). A target that is only slow (a loaded node) answers
// the look that waits the whole timeout and stays the target: the
// failover ends on it, no other target is chosen (each change is a
// status write, and a target promoted then taken for down is fenced
// again). A dead one misses the look too, and the next best replica is
// chosen.
func TestAFailoverTargetThatMissesItsProbesIsLookedAtFirst(t *testing.T) {
	for _, dead := range []bool{false, true} {
		// Steps 1 to 5 of the failover: unlabel, detach, promote, label,
		// complete (step 0 starts it).
		for at := 1; at < 6; at++ {
			t.Run(fmt.Sprintf("dead %v, at step %d", dead, at), func(t *testing.T) {
				w := newFoWorld([]int64{120, 110, 100})
				w.slow = map[string]bool{}
				var steps []string
				targets := map[string]bool{}
				looked := false
				for i := 0; ; i++ {
					if i > 60 {
						t.Fatalf("no convergence: %v", steps)
					}
					if op := w.s.Operation; i == at && op != nil {
						w.set(op.ToPod, func(p *PodState) {
							p.Obs.Reachable, p.Obs.LastSeen, p.Obs.MissedWait = false, w.s.Now.Add(-2*time.Second), 500*time.Millisecond
						})
						w.slow[op.ToPod] = !dead
					}
					a := Next(w.s)
					if a.Type == ActionNone {
						break
					}
					if a.Type == ActionWait {
						t.Fatalf("step %d: %s (after %v)", i, a, steps)
					}
					steps = append(steps, a.String())
					switch a.Type {
					case ActionStartFailover:
						targets[a.Pod] = true
					case ActionLastLook:
						looked = looked || a.Pod == "c-1"
					}
					if err := w.apply(a); err != nil {
						t.Fatalf("step %d: %v (steps %v)", i, err, steps)
					}
				}
				want, wantTargets := "c-1", 1
				if dead {
					want, wantTargets = "c-2", 2
				}
				if !looked || w.s.CurrentMaster != want || len(targets) != wantTargets {
					t.Fatalf("looked at c-1 %v, new master %s, targets %v; want %s after a look (steps %v)", looked, w.s.CurrentMaster, targets, want, steps)
				}
			})
		}
	}
}

// TestAFailoverGoesOnWithASlowTarget plays a failover step by step and,
// before each step, asks what the plan would be if the target had just
// missed its periodic probes (since its last answer, taken after the
// failover started, 300 ms ago). After the promotion, when every missed
// probe ran out of time (a live pod on a loaded node), the plan is the
// step it would take on a target that answered: no wait, no look, no
// other target. Before the promotion (its offset is compared with the
// other replicas'), or when the target has not answered since the start,
// a target whose missed probes only ran out of time gets a look that
// waits the whole timeout; when one was refused (a killed pod), the
// failover waits.
func TestAFailoverGoesOnWithASlowTarget(t *testing.T) {
	w := newFoWorld([]int64{120, 110, 100})
	var steps []string
	goneOn := 0
	for i := 0; ; i++ {
		if i > 60 {
			t.Fatalf("no convergence: %v", steps)
		}
		a := Next(w.s)
		if a.Type == ActionNone {
			break
		}
		if op := w.s.Operation; op != nil && a.Type != ActionUnlabel {
			target, _ := w.s.Pod(op.ToPod)
			promoted := target.Obs.Role == "master"
			for _, c := range []struct {
				name                     string
				slow, answeredSinceStart bool
				goesOn                   bool
			}{
				{"slow", true, true, promoted},
				{"refused a probe", false, true, false},
				{"not answered since the start", true, false, false},
			} {
				missed := w.s
				missed.Pods = append([]PodState(nil), w.s.Pods...)
				for j := range missed.Pods {
					if p := &missed.Pods[j]; p.Name == op.ToPod {
						p.Obs.Reachable, p.Obs.Slow, p.Obs.MissedWait = false, c.slow, 500*time.Millisecond
						p.Obs.LastSeen = missed.Now.Add(-300 * time.Millisecond)
						if !c.answeredSinceStart {
							missed.Operation = op.DeepCopy()
							missed.Operation.StartedAt.Time = p.Obs.LastSeen.Add(time.Millisecond)
						}
					}
				}
				got := Next(missed)
				bare := got
				bare.Reason = strings.TrimSuffix(strings.Split(got.Reason, "the promoted target missed")[0], " (")
				switch {
				case !c.goesOn && c.slow && (got.Type != ActionLastLook || got.Pod != op.ToPod):
					t.Errorf("step %d (%s), target %s (promoted %v): %s, want a look at it", i, a, c.name, promoted, got)
				case !c.goesOn && !c.slow && got.Type != ActionWait:
					t.Errorf("step %d (%s), target %s (promoted %v): %s, want a wait", i, a, c.name, promoted, got)
				case c.goesOn && bare.String() != a.String():
					t.Errorf("step %d, target %s: %s, want %s as on a target that answered", i, c.name, got, a)
				case c.goesOn && !strings.Contains(got.Reason, "the promoted target missed its probes since it answered at"):
					t.Errorf("step %d, target %s: %s does not say the target missed its probes", i, c.name, got)
				case c.goesOn:
					goneOn++
				}
			}
		}
		steps = append(steps, a.String())
		if err := w.apply(a); err != nil {
			t.Fatalf("step %d: %v (steps %v)", i, err, steps)
		}
	}
	if w.s.CurrentMaster != "c-1" {
		t.Fatalf("new master %s, want c-1 (steps %v)", w.s.CurrentMaster, steps)
	}
	// Label and complete.
	if goneOn != 2 {
		t.Fatalf("%d steps went on with a slow target, want 2 (steps %v)", goneOn, steps)
	}
}

// TestReplicasThatOnlyRanOutOfTimeAreLookedAtWhenTheMasterIsSurelyDown:
// the master is down and no replica answers. When the master is surely
// down (it refused a probe, or missed the look that waits the whole
// timeout), each replica whose missed probes only ran out of time gets a
// look, one after another, and no target is chosen while one is in
// flight; a replica that refused, or missed its look, gets none. A master
// that only missed its periodic probes gets no such looks at its
// replicas.
func TestReplicasThatOnlyRanOutOfTimeAreLookedAtWhenTheMasterIsSurelyDown(t *testing.T) {
	slowReplica := func(name, ip string, f func(*PodState)) PodState {
		p := down(pod(name, ip, "slave", ip0, "replica", 100, 10), 2*time.Second)
		p.Obs.MissedWait, p.Obs.Slow = 500*time.Millisecond, true
		if f != nil {
			f(&p)
		}
		return p
	}
	master := func(f func(*PodState)) PodState {
		p := down(pod("c-0", ip0, "master", "", "master", 120, 10), 2*time.Second)
		if f != nil {
			f(&p)
		}
		return p
	}
	killed := func(p *PodState) { p.Obs.Slow, p.Obs.MissedWait = false, time.Second }
	slowOnly := func(p *PodState) { p.Obs.Slow, p.Obs.MissedWait = true, 500*time.Millisecond }
	slowLooked := func(p *PodState) { p.Obs.Slow, p.Obs.MissedWait = true, time.Second }
	looking := func(p *PodState) { p.Obs.LookingSince = now.Add(-200 * time.Millisecond) }
	missedLook := func(p *PodState) { p.Obs.MissedWait = time.Second }
	refused := func(p *PodState) { p.Obs.Slow = false }
	for _, c := range []struct {
		name   string
		pods   []PodState
		want   ActionType
		wantOn string
	}{
		{"a killed master: a look at the first slow replica", []PodState{master(killed), slowReplica("c-1", ip1, nil), slowReplica("c-2", ip2, nil)}, ActionLastLook, "c-1"},
		{"its look in flight: a look at the next", []PodState{master(killed), slowReplica("c-1", ip1, looking), slowReplica("c-2", ip2, nil)}, ActionLastLook, "c-2"},
		{"both in flight: wait", []PodState{master(killed), slowReplica("c-1", ip1, looking), slowReplica("c-2", ip2, looking)}, ActionWait, "c-1"},
		{"one missed its look, the other refused: wait for an answer", []PodState{master(killed), slowReplica("c-1", ip1, missedLook), slowReplica("c-2", ip2, refused)}, ActionWait, "c-0"},
		{"a master that missed its whole look: a look at a slow replica", []PodState{master(slowLooked), slowReplica("c-1", ip1, nil), slowReplica("c-2", ip2, nil)}, ActionLastLook, "c-1"},
		{"a master that only missed its periodic probes: no look at the replicas", []PodState{master(slowOnly), slowReplica("c-1", ip1, nil), slowReplica("c-2", ip2, nil)}, ActionWait, "c-0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := steady(Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: c.pods, StepDeadline: time.Minute})
			got := Next(s)
			if got.Type != c.want || got.Pod != c.wantOn {
				t.Fatalf("%s, want %s %s", got, c.want, c.wantOn)
			}
		})
	}
	// A replica answers its look while the other's is in flight: the
	// other is waited for, as it may hold more; then the one with more
	// of the stream, or the one that answered if the other missed its
	// look, takes over.
	answered := pod("c-1", ip1, "slave", ip0, "replica", 100, 10)
	for _, c := range []struct {
		name   string
		c2     PodState
		want   ActionType
		wantOn string
	}{
		{"the other's look in flight", slowReplica("c-2", ip2, looking), ActionWait, "c-2"},
		{"the other missed its look", slowReplica("c-2", ip2, missedLook), ActionStartFailover, "c-1"},
		{"the other answered with more", pod("c-2", ip2, "slave", ip0, "replica", 120, 10), ActionStartFailover, "c-2"},
	} {
		t.Run("one answered its look, "+c.name, func(t *testing.T) {
			s := steady(Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", StepDeadline: time.Minute, Pods: []PodState{
				master(killed), answered, c.c2}})
			if got := Next(s); got.Type != c.want || got.Pod != c.wantOn {
				t.Fatalf("%s, want %s %s", got, c.want, c.wantOn)
			}
		})
	}
}

// TestAReplicaHeardSinceTheMasterFellSilentIsCompared: the master was
// killed; it last answered 2 s ago, and was judged on a probe sent 1.5 s
// ago that it missed after waiting the whole timeout. c-1 answers now;
// c-2 only runs out of time. A target is chosen on what every replica of
// the master holds: c-2 is compared on its last answer when that came
// after the master was judged; else it gets a look first, as it may hold
// writes that it alone acknowledged. A replica that refused since its
// answer (killed too), or that follows another pod, is not waited for.
func TestAReplicaHeardSinceTheMasterFellSilentIsCompared(t *testing.T) {
	master := down(pod("c-0", ip0, "master", "", "master", 120, 10), 2*time.Second)
	master.Obs.MissedWait, master.Obs.MissedWaitSent = time.Second, now.Add(-1500*time.Millisecond)
	replica := func(name, ip string, offset int64, answered time.Duration, f func(*PodState)) PodState {
		p := down(pod(name, ip, "slave", ip0, "replica", offset, 10), answered)
		p.Obs.MasterLinkUp, p.Obs.Slow, p.Obs.MissedWait = false, true, 500*time.Millisecond
		if f != nil {
			f(&p)
		}
		return p
	}
	c1 := pod("c-1", ip1, "slave", ip0, "replica", 100, 10)
	c1.Obs.MasterLinkUp = false
	c2 := func(offset int64, answered time.Duration, f func(*PodState)) PodState {
		return replica("c-2", ip2, offset, answered, f)
	}
	refused := func(p *PodState) { p.Obs.Slow, p.Obs.MissedWait = false, time.Second }
	looking := func(p *PodState) { p.Obs.LookingSince = now.Add(-200 * time.Millisecond) }
	linkUp := func(p *PodState) { p.Obs.MasterLinkUp = true }
	loading := func(p *PodState) { p.Obs.Loading = true }
	repointed := func(p *PodState) { p.Obs.MasterHost = ip1 }
	for _, c := range []struct {
		name   string
		c1, c2 PodState
		want   ActionType
		wantOn string
	}{
		{"silent since before the master's last answer: a look at it", c1, c2(120, 3*time.Second, nil), ActionLastLook, "c-2"},
		{"answered after the master's last answer, before it was judged: a look at it", c1, c2(120, 1800*time.Millisecond, nil), ActionLastLook, "c-2"},
		{"its look in flight: wait for it", c1, c2(120, 3*time.Second, looking), ActionWait, "c-2"},
		{"heard since, with more: it takes over", c1, c2(120, time.Second, nil), ActionStartFailover, "c-2"},
		{"answered since with its link up: not compared, no second look", c1, c2(120, time.Second, linkUp), ActionStartFailover, "c-1"},
		{"silent since before, link up: a look at it", c1, c2(120, 3*time.Second, linkUp), ActionLastLook, "c-2"},
		{"heard since, with less: c-1 takes over, no look", c1, c2(90, time.Second, nil), ActionStartFailover, "c-1"},
		{"heard since, then refused: c-1 takes over", c1, c2(120, time.Second, refused), ActionStartFailover, "c-1"},
		{"answered since, loading: not compared, no second look", c1, c2(120, time.Second, loading), ActionStartFailover, "c-1"},
		{"follows another pod: no look", c1, c2(120, 3*time.Second, repointed), ActionStartFailover, "c-1"},
		{"follows another pod, answered since, with more: not compared", c1, c2(120, time.Second, repointed), ActionStartFailover, "c-1"},
		{"its role not known yet (not heard since the operator started): a look at it", c1, c2(0, 0, func(p *PodState) {
			p.Obs = probe.Observation{Pod: "c-2", IP: ip2, ProbedAt: now, FailingSince: now.Add(-3 * time.Second), Slow: true, MissedWait: 500 * time.Millisecond}
		}), ActionLastLook, "c-2"},
		{"as much as one that answers now: the one that answers", replica("c-1", ip1, 100, time.Second, nil), pod("c-2", ip2, "slave", ip0, "replica", 100, 10), ActionStartFailover, "c-2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := steady(Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", StepDeadline: time.Minute,
				Pods: []PodState{master, c.c1, c.c2}})
			if got := Next(s); got.Type != c.want || got.Pod != c.wantOn {
				t.Fatalf("%s, want %s %s", got, c.want, c.wantOn)
			}
		})
	}
	// The master answered after the probe it is judged on was sent (a
	// look that failed after a later answer): it is not judged from that
	// probe, and c-2's answer after it is not enough.
	t.Run("the master answered after the probe it missed was sent: a look at c-2", func(t *testing.T) {
		m := master
		m.Obs.LastSeen = now.Add(-1200 * time.Millisecond)
		s := steady(Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", StepDeadline: time.Minute,
			Pods: []PodState{m, c1, c2(120, time.Second, nil)}})
		if got := Next(s); got.Type != ActionLastLook || got.Pod != "c-2" {
			t.Fatalf("%s, want LastLook c-2", got)
		}
	})
	// During the failover to c-1, before the promotion: c-2, heard since
	// the master was judged, with more of the stream, becomes the target.
	t.Run("during the failover, heard since with more: it becomes the target", func(t *testing.T) {
		s := steady(Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", StepDeadline: time.Minute,
			Operation: failoverOp("c-0", "c-1"), Pods: []PodState{master, c1, c2(120, time.Second/2, nil)}})
		s.Pods[0].RoleLabel = ""
		if got := Next(s); got.Type != ActionStartFailover || got.Pod != "c-2" {
			t.Fatalf("%s, want StartFailover c-2", got)
		}
	})
}

// canAcknowledge lists the Redis masters with a replica attached.
func canAcknowledge(s Snapshot) []string {
	var out []string
	for _, m := range s.Pods {
		if m.Obs.Role != "master" {
			continue
		}
		for _, p := range s.Pods {
			if p.Name != m.Name && p.Obs.Role == "slave" && p.Obs.MasterHost == m.IP {
				out = append(out, m.Name)
				break
			}
		}
	}
	return out
}

// TestSwitchoverLeavesOneAcknowledger plays requested switchovers and the
// one of a scale-down: at every step at most one pod can acknowledge a
// write; from Redis FAILOVER on, it is the target.
func TestSwitchoverLeavesOneAcknowledger(t *testing.T) {
	for _, c := range []struct {
		name           string
		replicas, want int32
		to             string
	}{
		{"requested switchover to c-2", 3, 3, "c-2"},
		{"requested switchover to the best replica", 5, 5, cachev1alpha1.SwitchoverToBest},
		{"scale-down 3→2 with the master on ordinal 2", 3, 2, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			master := "c-0"
			if c.to == "" {
				master = "c-2"
			}
			w := newWorld("c", cachev1alpha1.RolloutValues{Replicas: c.replicas, Version: "7.0.15"}, master)
			w.s.Spec = *w.s.Approved.DeepCopy()
			w.s.Spec.Replicas = c.want
			w.s.SwitchoverTo = c.to
			swapped := ""
			for i := 0; i < 100; i++ {
				a := Next(w.s)
				if a.Type == ActionNone {
					break
				}
				if a.Type == ActionWait {
					t.Fatalf("step %d: %s", i, a)
				}
				w.apply(a)
				if a.Type == ActionGracefulSwitchover {
					swapped = a.Pod
				}
				got := canAcknowledge(w.s)
				if len(got) > 1 {
					t.Fatalf("after step %d (%s): %v can acknowledge writes", i, a, got)
				}
				if swapped != "" && len(got) == 1 && got[0] != swapped {
					t.Fatalf("after step %d (%s): %s can acknowledge writes, not the target %s", i, a, got[0], swapped)
				}
			}
			if swapped == "" || w.s.CurrentMaster != swapped || w.s.Operation != nil {
				t.Fatalf("switchover to %q did not end with it as master (master %s, operation %v)", swapped, w.s.CurrentMaster, w.s.Operation)
			}
		})
	}
}

// A master that missed the look it is judged on while a replica, its link
// up, heard from it since that look was sent is alive to its replicas: it
// is looked at again, for up to aliveGraceTimeouts probe timeouts since it
// last answered, not failed over. A killed master (the link drops), a
// frozen one (the replica last heard from it before the look), one cut
// off for longer than that, and a replica's word that cannot show it, do
// not hold the failover.
func TestAMasterItsReplicasHearIsLookedAtAgain(t *testing.T) {
	const timeout = 2 * time.Second
	master := down(pod("c-0", ip0, "master", "", "master", 120, 10), 4*time.Second)
	master.Obs.MissedWait, master.Obs.MissedWaitSent = timeout, now.Add(-2500*time.Millisecond)
	replica := func(name, ip string, f func(*PodState)) PodState {
		p := probedAt(pod(name, ip, "slave", ip0, "replica", 120, 10), now.Add(-200*time.Millisecond))
		p.Obs.MasterLastIOSeconds = 0
		if f != nil {
			f(&p)
		}
		return p
	}
	lastIO := func(n int64) func(*PodState) { return func(p *PodState) { p.Obs.MasterLastIOSeconds = n } }
	linkDown := func(p *PodState) { p.Obs.MasterLinkUp, p.Obs.MasterLastIOSeconds = false, -1 }
	for _, c := range []struct {
		name   string
		m      func(*PodState)
		c1     func(*PodState)
		want   ActionType
		wantOn string
	}{
		{"a replica heard from it 1.2 s ago at the earliest, after the look was sent: another look", nil, nil, ActionLastLook, "c-0"},
		{"frozen: the replica last heard from it 3 s ago at the latest", nil, lastIO(2), ActionStartFailover, "c-1"},
		{"killed: the replica's link is down", nil, linkDown, ActionStartFailover, "c-1"},
		{"the replica does not tell when it last heard", nil, lastIO(-1), ActionStartFailover, "c-1"},
		{"the replica's answer was asked for before the look was sent", nil, func(p *PodState) { p.Obs.ProbedAt = now.Add(-3 * time.Second) }, ActionStartFailover, "c-1"},
		{"the replica follows another pod", nil, func(p *PodState) { p.Obs.MasterHost = ip2 }, ActionStartFailover, "c-1"},
		{"the replica does not answer now", nil, func(p *PodState) { p.Obs.Reachable = false }, ActionStartFailover, "c-2"},
		{"silent to the operator for longer than the grace", func(p *PodState) { p.Obs.LastSeen = now.Add(-aliveGraceTimeouts*timeout - time.Millisecond) }, nil, ActionStartFailover, "c-1"},
		{"its second look in flight: wait for it", func(p *PodState) { p.Obs.LookingSince = now.Add(-time.Second) }, nil, ActionWait, "c-0"},
		{"its second look in flight, the grace over: wait for it all the same", func(p *PodState) {
			p.Obs.LookingSince, p.Obs.LastSeen = now.Add(-time.Second), now.Add(-aliveGraceTimeouts*timeout-time.Millisecond)
		}, nil, ActionWait, "c-0"},
		{"the replica last read from it 1-2 s before its probe was sent: another look", nil, lastIO(1), ActionLastLook, "c-0"},
		{"the replica's link is down, whatever it last read", nil, func(p *PodState) { p.Obs.MasterLinkUp = false }, ActionStartFailover, "c-1"},
		{"the replica is loading", nil, func(p *PodState) { p.Obs.Loading = true }, ActionStartFailover, "c-2"},
		{"the replica follows the address the master had before its pod came back with another", func(p *PodState) { p.IP, p.Obs.IP = ipNew, ipNew },
			nil, ActionStartFailover, "c-1"},
		{"judged again on the second look: the replica heard from it before that look", func(p *PodState) { p.Obs.MissedWaitSent = now.Add(-time.Second) }, nil, ActionStartFailover, "c-1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := master
			if c.m != nil {
				c.m(&m)
			}
			c2 := replica("c-2", ip2, linkDown)
			c2.Obs.Offset = 100
			s := steady(Snapshot{Now: now, ProbeTimeout: timeout, AutoFailover: true, CurrentMaster: "c-0", MasterAddress: ip0, StepDeadline: time.Minute,
				Pods: []PodState{m, replica("c-1", ip1, c.c1), c2}})
			got := Next(s)
			if got.Type != c.want || got.Pod != c.wantOn {
				t.Fatalf("%s, want %s %s", got, c.want, c.wantOn)
			}
			if (got.Type == ActionLastLook) != got.MasterSlow {
				t.Fatalf("%s: a look at a master its replicas hear says so in a MasterSlow Event, and only that look", got)
			}
		})
	}
}
