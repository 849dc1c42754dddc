package plan

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
	"github.com/cacheops/cacheops/renderer"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// pod builds a PodState; role is the Redis role, label the role label.
func pod(name, ip, role, masterHost, label string, offset, keys int64) PodState {
	return PodState{Name: name, IP: ip, RoleLabel: label, Observed: true, Obs: probe.Observation{
		Pod: name, IP: ip, Reachable: true, LastSeen: now, ProbedAt: now, Role: role, MasterHost: masterHost,
		MasterLinkUp: role == "slave" && masterHost != "", MasterLastIOSeconds: -1, Offset: offset, Keys: keys,
	}}
}

func probedAt(p PodState, t time.Time) PodState {
	p.Obs.ProbedAt = t
	return p
}

// down: p has not answered for since, and its most patient probe waited
// as long in vain.
func down(p PodState, since time.Duration) PodState {
	p.Obs.Reachable = false
	p.Obs.LastSeen = now.Add(-since)
	p.Obs.MissedWait = since
	return p
}

// slowToAnswer: p missed only its periodic probes (they wait half the
// timeout), none that waited the whole timeout; a look at it is in flight
// since looking, unless that is zero.
func slowToAnswer(p PodState, looking time.Time) PodState {
	p.Obs.MissedWait, p.Obs.LookingSince = 500*time.Millisecond, looking
	return p
}

const (
	ip0 = "10.244.0.10"
	ip1 = "10.244.0.11"
	ip2 = "10.244.0.12"
	// ipNew is an address a recreated pod gets.
	ipNew = "10.244.0.20"
)

// healthyCluster: c-0 master, c-1 and c-2 replicas, all labelled.
func healthyCluster() []PodState {
	return []PodState{
		pod("c-0", ip0, "master", "", "master", 100, 10),
		pod("c-1", ip1, "slave", ip0, "replica", 100, 10),
		pod("c-2", ip2, "slave", ip0, "replica", 100, 10),
	}
}

// history sets a pod's replication IDs and run age.
func history(p PodState, id, id2 string, secondOffset, uptime int64) PodState {
	p.Obs.ReplID, p.Obs.ReplID2, p.Obs.SecondReplOffset, p.Obs.UptimeSeconds = id, id2, secondOffset, uptime
	return p
}

// linkDown: a replica that has not heard from its master for the given
// seconds.
func linkDown(p PodState, seconds int64) PodState {
	p.Obs.MasterLinkUp, p.Obs.LinkDownSeconds = false, seconds
	return p
}

func failoverOp(from, to string) *cachev1alpha1.OperationStatus {
	return &cachev1alpha1.OperationStatus{ID: "op1", Type: cachev1alpha1.OperationFailover, FromPod: from, ToPod: to, StartedAt: metav1.NewTime(now.Add(-time.Second))}
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name  string
		given Snapshot
		want  Action
	}{
		{
			name:  "bootstrap waits until a pod answers",
			given: Snapshot{Pods: []PodState{{Name: "c-0"}, {Name: "c-1"}}},
			want:  Action{Type: ActionWait, OnAnswer: true},
		},
		{
			name: "bootstrap picks the lowest ordinal among empty pods",
			given: Snapshot{Pods: []PodState{
				pod("c-2", ip2, "master", "", "", 0, 0), pod("c-0", ip0, "master", "", "", 0, 0), pod("c-1", ip1, "master", "", "", 0, 0),
			}},
			want: Action{Type: ActionBootstrap, Pod: "c-0"},
		},
		{
			name: "bootstrap never prefers an empty pod over one with data",
			given: Snapshot{Pods: []PodState{
				pod("c-0", ip0, "master", "", "", 0, 0), pod("c-1", ip1, "master", "", "", 50, 7),
			}},
			want: Action{Type: ActionBootstrap, Pod: "c-1"},
		},
		{
			name: "bootstrap waits for a pod with an address that has not been probed yet",
			given: Snapshot{Pods: []PodState{
				pod("c-2", ip2, "master", "", "", 0, 0), {Name: "c-0", IP: ip0}, pod("c-1", ip1, "master", "", "", 0, 0),
			}},
			want: Action{Type: ActionWait, Pod: "c-0", OnAnswer: true},
		},
		{
			name: "bootstrap does not wait for a pod that did not answer, nor for one without an address",
			given: Snapshot{Pods: []PodState{
				pod("c-2", ip2, "master", "", "", 0, 0), down(pod("c-0", ip0, "master", "", "", 0, 9), time.Second), {Name: "c-1"},
			}},
			want: Action{Type: ActionBootstrap, Pod: "c-2"},
		},
		{
			name:  "healthy cluster needs nothing",
			given: Snapshot{CurrentMaster: "c-0", Pods: healthyCluster()},
			want:  Action{Type: ActionNone},
		},
		{
			name: "a new master gets its label",
			given: Snapshot{CurrentMaster: "c-0", Pods: []PodState{
				pod("c-0", ip0, "master", "", "", 0, 0), pod("c-1", ip1, "master", "", "", 0, 0),
			}},
			want: Action{Type: ActionLabelMaster, Pod: "c-0"},
		},
		{
			name: "another pod's master label goes first: never two",
			given: Snapshot{CurrentMaster: "c-0", Pods: []PodState{
				pod("c-0", ip0, "master", "", "", 0, 0), pod("c-1", ip1, "slave", ip0, "master", 0, 0),
			}},
			want: Action{Type: ActionUnlabel, Pod: "c-1"},
		},
		{
			name: "standalone pods become replicas of the master",
			given: Snapshot{CurrentMaster: "c-0", Pods: []PodState{
				pod("c-0", ip0, "master", "", "master", 0, 0), pod("c-1", ip1, "master", "", "", 0, 0),
			}},
			want: Action{Type: ActionFence, Pod: "c-1", Master: "c-0"},
		},
		{
			name: "a replica of another address is repointed",
			given: Snapshot{CurrentMaster: "c-0", Pods: []PodState{
				pod("c-0", ip0, "master", "", "master", 0, 0), pod("c-1", ip1, "slave", "10.244.0.99", "replica", 0, 0),
			}},
			want: Action{Type: ActionRepoint, Pod: "c-1", Master: "c-0"},
		},
		{
			name: "an in-sync replica gets its label",
			given: Snapshot{CurrentMaster: "c-0", Pods: []PodState{
				pod("c-0", ip0, "master", "", "master", 0, 0), pod("c-1", ip1, "slave", ip0, "", 0, 0),
			}},
			want: Action{Type: ActionLabelReplica, Pod: "c-1"},
		},
		{
			name: "a master unreachable for less than the timeout is not failed over",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: func() []PodState {
				p := healthyCluster()
				p[0] = down(p[0], 500*time.Millisecond)
				return p
			}()},
			want: Action{Type: ActionWait, Pod: "c-0", OnAnswer: true, Until: now.Add(500*time.Millisecond + time.Millisecond)},
		},
		{
			name: "a master down past the timeout fails over to the replica with the highest offset",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "master", 120, 10), 2*time.Second),
				pod("c-1", ip1, "slave", ip0, "replica", 100, 10),
				pod("c-2", ip2, "slave", ip0, "replica", 110, 10),
			}},
			want: Action{Type: ActionStartFailover, Pod: "c-2", Master: "c-0"},
		},
		{
			name: "a master down past the timeout whose probes each waited less: a last look that waits the timeout first",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				func() PodState {
					p := down(pod("c-0", ip0, "master", "", "master", 120, 10), 2*time.Second)
					p.Obs.MissedWait = 500 * time.Millisecond
					return p
				}(),
				pod("c-1", ip1, "slave", ip0, "replica", 100, 10),
			}},
			want: Action{Type: ActionLastLook, Pod: "c-0"},
		},
		{
			name: "the master's last look is in flight: wait for it",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				func() PodState {
					p := down(pod("c-0", ip0, "master", "", "master", 120, 10), 2*time.Second)
					p.Obs.MissedWait = 500 * time.Millisecond
					p.Obs.LookingSince = now.Add(-300 * time.Millisecond)
					return p
				}(),
				pod("c-1", ip1, "slave", ip0, "replica", 100, 10),
			}},
			want: Action{Type: ActionWait, Pod: "c-0", OnAnswer: true, Until: now.Add(-300*time.Millisecond + 2*time.Second)},
		},
		{
			name: "equal offsets: the lowest ordinal wins",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "master", 120, 10), 2*time.Second),
				pod("c-2", ip2, "slave", ip0, "replica", 110, 10),
				pod("c-1", ip1, "slave", ip0, "replica", 110, 10),
			}},
			want: Action{Type: ActionStartFailover, Pod: "c-1", Master: "c-0"},
		},
		{
			name: "an empty replica is never promoted while another holds data",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "master", 120, 10), 2*time.Second),
				pod("c-1", ip1, "slave", ip0, "replica", 500, 0),
				pod("c-2", ip2, "slave", ip0, "replica", 100, 10),
			}},
			want: Action{Type: ActionStartFailover, Pod: "c-2", Master: "c-0"},
		},
		{
			name: "a gone master pod fails over too",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				pod("c-1", ip1, "slave", ip0, "replica", 100, 10),
			}},
			want: Action{Type: ActionStartFailover, Pod: "c-1", Master: "c-0"},
		},
		{
			name: "automatic failover off: wait",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, CurrentMaster: "c-0", Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "master", 120, 10), 2*time.Second),
				pod("c-1", ip1, "slave", ip0, "replica", 100, 10),
			}},
			want: Action{Type: ActionWait, Pod: "c-0", OnAnswer: true},
		},
		{
			name: "no replica answers: wait",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "master", 120, 10), 2*time.Second),
				down(pod("c-1", ip1, "slave", ip0, "replica", 100, 10), 2*time.Second),
			}},
			want: Action{Type: ActionWait, Pod: "c-0", OnAnswer: true},
		},
		{
			name: "failover whose target missed only its periodic probes: a look at it before choosing again",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "", 120, 10), 2*time.Second),
				slowToAnswer(down(pod("c-1", ip1, "slave", ip0, "replica", 110, 10), 2*time.Second), time.Time{}),
				pod("c-2", ip2, "slave", ip0, "replica", 100, 10),
			}},
			want: Action{Type: ActionLastLook, Pod: "c-1"},
		},
		{
			name: "the look at the failover target is in flight: wait for it",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "", 120, 10), 2*time.Second),
				slowToAnswer(down(pod("c-1", ip1, "slave", ip0, "replica", 110, 10), 2*time.Second), now),
				pod("c-2", ip2, "slave", ip0, "replica", 100, 10),
			}},
			want: Action{Type: ActionWait, Pod: "c-1", OnAnswer: true, Until: now.Add(2 * time.Second)},
		},
		{
			name: "two pods claim master in Redis: the other one is fenced",
			given: Snapshot{CurrentMaster: "c-1", Pods: []PodState{
				pod("c-0", ip0, "master", "", "", 130, 10),
				pod("c-1", ip1, "master", "", "master", 120, 10),
				pod("c-2", ip2, "slave", ip1, "replica", 120, 10),
			}},
			want: Action{Type: ActionFence, Pod: "c-0", Master: "c-1"},
		},
		{
			name: "a master that came back empty while replicas hold data is failed over",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				pod("c-0", ip0, "master", "", "master", 0, 0),
				func() PodState {
					p := pod("c-1", ip1, "slave", ip0, "replica", 100, 10)
					p.Obs.MasterLinkUp = false
					return p
				}(),
			}},
			want: Action{Type: ActionStartFailover, Pod: "c-1", Master: "c-0"},
		},
		{
			// Seen in the e2e suite: right after a switchover, a replica just
			// repointed to the new master reported its offset at once, the
			// master's was from its last probe, and the master was judged to
			// lack history it had.
			name: "a master's offset older than a replica's is read again before it is judged to lack history",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				probedAt(history(pod("c-0", ip0, "master", "", "master", 900, 10), "A", "", 0, 3), now.Add(-200*time.Millisecond)),
				linkDown(history(pod("c-1", ip1, "slave", ip0, "replica", 1000, 10), "A", "", 0, 3), 0),
				history(pod("c-2", ip2, "slave", ip0, "replica", 900, 10), "A", "", 0, 3),
			}},
			want: Action{Type: ActionRefresh, Pods: []string{"c-0"}},
		},
		{
			name: "a master restarted with a shorter copy of its history is failed over to the replica that holds more",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				history(pod("c-0", ip0, "master", "", "master", 900, 10), "A", "", 0, 3),
				linkDown(history(pod("c-1", ip1, "slave", ip0, "replica", 1000, 10), "A", "", 0, 3), 4),
				linkDown(history(pod("c-2", ip2, "slave", ip0, "replica", 950, 10), "A", "", 0, 3), 4),
			}},
			want: Action{Type: ActionStartFailover, Pod: "c-1", Master: "c-0"},
		},
		{
			name: "a master restarted in place with a new history is failed over to the replica whose link it dropped",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				history(pod("c-0", ip0, "master", "", "master", 40, 10), "B", "", 0, 2),
				linkDown(history(pod("c-1", ip1, "slave", ip0, "replica", 1000, 10), "A", "", 0, 3), 3),
				linkDown(history(pod("c-2", ip2, "slave", ip0, "replica", 1010, 10), "A", "", 0, 3), 3),
			}},
			want: Action{Type: ActionStartFailover, Pod: "c-2", Master: "c-0"},
		},
		{
			// Seen in the fleet benchmark (run 5): c-0 was promoted by a
			// failover after it had restarted and resynchronised from the
			// master before it (history B, which had continued A); c-1 had
			// not linked to that master and still held A up to 1185. Taken
			// for a master that restarted with less history, c-0 was failed
			// over (there to c-1, the only other replica; here the planner
			// would pick c-2).
			name: "a master promoted holding more than a replica left behind on an older history is not failed over",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				history(pod("c-0", ip0, "master", "", "master", 1620, 10), "C", "B", 1501, 6),
				linkDown(history(pod("c-1", ip1, "slave", ip0, "replica", 1185, 10), "A", "", 0, 600), 7),
				history(pod("c-2", ip2, "slave", ip0, "replica", 1620, 10), "C", "B", 1501, 600),
			}},
			want: Action{Type: ActionNone},
		},
		{
			// The boundary: promoted at offset 1184 (second_repl_offset
			// 1185), c-0 lacks the last byte c-1 holds.
			name: "a master promoted holding less than a replica left behind is failed over",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				history(pod("c-0", ip0, "master", "", "master", 1620, 10), "C", "B", 1185, 6),
				linkDown(history(pod("c-1", ip1, "slave", ip0, "replica", 1185, 10), "A", "", 0, 600), 7),
			}},
			want: Action{Type: ActionStartFailover, Pod: "c-1", Master: "c-0"},
		},
		{
			name: "a master restarted in place with less history waits when automatic failover is off",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, CurrentMaster: "c-0", Pods: []PodState{
				history(pod("c-0", ip0, "master", "", "master", 40, 10), "B", "", 0, 2),
				linkDown(history(pod("c-1", ip1, "slave", ip0, "replica", 1000, 10), "A", "", 0, 3), 3),
			}},
			want: Action{Type: ActionWait, Pod: "c-0", Alert: cachev1alpha1.EventMasterLacksData, OnAnswer: true},
		},
		{
			// Every process starts as a replica of nobody: a master that
			// restarted in place is judged before it is promoted, while
			// its replicas, refused a sync by it, keep their data.
			name: "a master restarted as a replica of nobody with a new history is failed over, not promoted",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				linkDown(history(pod("c-0", ip0, "slave", cachev1alpha1.StartupMasterHost, "master", 0, 10), "B", "", 0, 2), 2),
				linkDown(history(pod("c-1", ip1, "slave", ip0, "replica", 1000, 10), "A", "", 0, 3), 3),
				linkDown(history(pod("c-2", ip2, "slave", ip0, "replica", 1010, 10), "A", "", 0, 3), 3),
			}},
			want: Action{Type: ActionStartFailover, Pod: "c-2", Master: "c-0"},
		},
		{
			// Its offset stands still: an older look at it is as good as
			// a new one.
			name: "a master restarted as a replica of nobody is failed over on an older look at it",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				probedAt(linkDown(history(pod("c-0", ip0, "slave", cachev1alpha1.StartupMasterHost, "master", 0, 10), "B", "", 0, 2), 2), now.Add(-200*time.Millisecond)),
				linkDown(history(pod("c-1", ip1, "slave", ip0, "replica", 1000, 10), "A", "", 0, 3), 3),
				linkDown(history(pod("c-2", ip2, "slave", ip0, "replica", 1010, 10), "A", "", 0, 3), 3),
			}},
			want: Action{Type: ActionStartFailover, Pod: "c-2", Master: "c-0"},
		},
		{
			name: "a master restarted as a replica of nobody waits for a person, with a Warning, when automatic failover is off",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, CurrentMaster: "c-0", Pods: []PodState{
				linkDown(history(pod("c-0", ip0, "slave", cachev1alpha1.StartupMasterHost, "master", 0, 10), "B", "", 0, 2), 2),
				linkDown(history(pod("c-1", ip1, "slave", ip0, "replica", 1000, 10), "A", "", 0, 3), 3),
			}},
			want: Action{Type: ActionWait, Pod: "c-0", Alert: cachev1alpha1.EventMasterLacksData, OnAnswer: true},
		},
		{
			// A master killed and recreated elsewhere (a node lost): its
			// pod comes back with another IP, its replicas still follow
			// the address the operator recorded when it served writes.
			name: "a master that came back at another address with a new history is failed over to a replica of its old address",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", MasterAddress: ip0, Pods: []PodState{
				linkDown(history(pod("c-0", ipNew, "slave", cachev1alpha1.StartupMasterHost, "master", 0, 10), "B", "", 0, 2), 2),
				linkDown(history(pod("c-1", ip1, "slave", ip0, "replica", 1000, 10), "A", "", 0, 3), 9),
				linkDown(history(pod("c-2", ip2, "slave", ip0, "replica", 1010, 10), "A", "", 0, 3), 9),
			}},
			want: Action{Type: ActionStartFailover, Pod: "c-2", Master: "c-0"},
		},
		{
			name: "a master that came back at another address waits for a person when automatic failover is off",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, CurrentMaster: "c-0", MasterAddress: ip0, Pods: []PodState{
				linkDown(history(pod("c-0", ipNew, "slave", cachev1alpha1.StartupMasterHost, "master", 0, 10), "B", "", 0, 2), 2),
				linkDown(history(pod("c-1", ip1, "slave", ip0, "replica", 1000, 10), "A", "", 0, 3), 9),
			}},
			want: Action{Type: ActionWait, Pod: "c-0", Alert: cachev1alpha1.EventMasterLacksData, OnAnswer: true},
		},
		{
			// Only an address the operator recorded links a replica to a
			// master: a replica following some address no pod has (an
			// older master's, say) is not taken for the master's replica.
			name: "a replica of an address the operator did not record for the master does not stop its promotion",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", MasterAddress: ip0, Pods: []PodState{
				linkDown(history(pod("c-0", ipNew, "slave", cachev1alpha1.StartupMasterHost, "master", 0, 10), "B", "", 0, 2), 2),
				linkDown(history(pod("c-1", ip1, "slave", "10.244.0.99", "replica", 1000, 10), "A", "", 0, 3), 9),
			}},
			want: Action{Type: ActionPromote, Pod: "c-0"},
		},
		{
			name: "a master restarted as a replica of nobody that lacks nothing is promoted",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				linkDown(history(pod("c-0", ip0, "slave", cachev1alpha1.StartupMasterHost, "master", 0, 10), "B", "", 0, 2), 2),
			}},
			want: Action{Type: ActionPromote, Pod: "c-0"},
		},
		{
			name: "a fresh pod started as a replica of nobody is pointed at the master, not fenced",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				pod("c-0", ip0, "master", "", "master", 100, 10),
				pod("c-1", ip1, "slave", ip0, "replica", 100, 10),
				linkDown(pod("c-2", ip2, "slave", cachev1alpha1.StartupMasterHost, "", 0, 0), 1),
			}},
			want: Action{Type: ActionRepoint, Pod: "c-2", Master: "c-0"},
		},
		{
			name: "replicas in sync with a restarted master follow it",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				history(pod("c-0", ip0, "master", "", "master", 1000, 10), "B", "", 0, 2),
				history(pod("c-1", ip1, "slave", ip0, "replica", 1000, 10), "B", "", 0, 3),
			}},
			want: Action{Type: ActionNone},
		},
		{
			name: "a master that kept running while a replica lost its link is no restart: the replica resyncs",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Pods: []PodState{
				history(pod("c-0", ip0, "master", "", "master", 5000, 10), "B", "A", 900, 600),
				linkDown(history(pod("c-1", ip1, "slave", ip0, "replica", 400, 10), "Z", "", 0, 3), 30),
			}},
			want: Action{Type: ActionNone},
		},
		{
			name: "an old master fenced after a failover resyncs: its extra writes were never acknowledged",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-1", Pods: []PodState{
				linkDown(history(pod("c-0", ip0, "slave", ip1, "", 1300, 10), "A", "", 0, 600), 1),
				history(pod("c-1", ip1, "master", "", "master", 1250, 10), "B", "A", 1201, 600),
				history(pod("c-2", ip2, "slave", ip1, "replica", 1250, 10), "B", "", 0, 600),
			}},
			want: Action{Type: ActionNone},
		},
		{
			name: "a replica not Ready for too long is recreated",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", RecreateAfter: time.Minute, Pods: func() []PodState {
				p := healthyCluster()
				p[2].NotReadySince = now.Add(-2 * time.Minute)
				return p
			}()},
			want: Action{Type: ActionRecreate, Pod: "c-2"},
		},
		{
			name: "a replica not Ready for a short while is left alone",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", RecreateAfter: time.Minute, Pods: func() []PodState {
				p := healthyCluster()
				p[2].NotReadySince = now.Add(-30 * time.Second)
				return p
			}()},
			want: Action{Type: ActionNone},
		},
		{
			name: "failover step 1: the old master loses its label",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "master", 120, 10), 2*time.Second),
				pod("c-1", ip1, "slave", ip0, "replica", 110, 10),
				pod("c-2", ip2, "slave", ip0, "replica", 100, 10),
			}},
			want: Action{Type: ActionUnlabel, Pod: "c-0"},
		},
		{
			name: "failover step 2: the other replicas follow the target before it is promoted",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "", 120, 10), 2*time.Second),
				pod("c-1", ip1, "slave", ip0, "replica", 110, 10),
				pod("c-2", ip2, "slave", ip0, "replica", 100, 10),
			}},
			want: Action{Type: ActionRepoint, Pod: "c-2", Master: "c-1"},
		},
		{
			// The executor never re-probes on its own: the planner asks for
			// a look after the failover began, then decides on it.
			name: "failover step 2: offsets read before the failover began are read again before anyone is detached",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "", 120, 10), 2*time.Second),
				probedAt(pod("c-1", ip1, "slave", ip0, "replica", 110, 10), now.Add(-2*time.Second)),
				probedAt(pod("c-2", ip2, "slave", ip0, "replica", 100, 10), now.Add(-2*time.Second)),
			}},
			want: Action{Type: ActionRefresh, Pods: []string{"c-1", "c-2"}},
		},
		{
			name: "failover step 3: the target's offset read before the failover began is read again before the promotion",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "", 120, 10), 2*time.Second),
				probedAt(pod("c-1", ip1, "slave", ip0, "replica", 110, 10), now.Add(-2*time.Second)),
				pod("c-2", ip2, "slave", ip1, "replica", 100, 10),
			}},
			want: Action{Type: ActionRefresh, Pods: []string{"c-1"}},
		},
		{
			name: "failover step 2: a replica holding more than the target becomes the target instead of following it",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "", 120, 10), 2*time.Second),
				pod("c-1", ip1, "slave", ip0, "replica", 110, 10),
				pod("c-2", ip2, "slave", ip0, "replica", 115, 10),
			}},
			want: Action{Type: ActionStartFailover, Pod: "c-2", Master: "c-0"},
		},
		{
			name: "failover step 2: with the old master back the offsets move; the target stays, the others are detached",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				pod("c-0", ip0, "master", "", "", 130, 10),
				pod("c-1", ip1, "slave", ip0, "replica", 120, 10),
				pod("c-2", ip2, "slave", ip0, "replica", 125, 10),
			}},
			want: Action{Type: ActionRepoint, Pod: "c-2", Master: "c-1"},
		},
		{
			name: "failover step 3: promote once no other replica follows the old master",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "", 120, 10), 2*time.Second),
				pod("c-1", ip1, "slave", ip0, "replica", 110, 10),
				pod("c-2", ip2, "slave", ip1, "replica", 100, 10),
			}},
			want: Action{Type: ActionPromote, Pod: "c-1"},
		},
		{
			name: "failover step 3: the old master answering before the promotion is left to the target, which keeps what it acknowledges",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				pod("c-0", ip0, "master", "", "", 130, 10),
				pod("c-1", ip1, "slave", ip0, "replica", 130, 10),
				pod("c-2", ip2, "slave", ip1, "replica", 130, 10),
			}},
			want: Action{Type: ActionPromote, Pod: "c-1"},
		},
		{
			name: "failover step 4: the old master answering after the promotion is fenced before the new master gets traffic",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				pod("c-0", ip0, "master", "", "", 130, 10),
				pod("c-1", ip1, "master", "", "replica", 120, 10),
				pod("c-2", ip2, "slave", ip1, "replica", 120, 10),
			}},
			want: Action{Type: ActionFence, Pod: "c-0", Master: "c-1"},
		},
		{
			name: "failover step 5: label the new master",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "", 120, 10), 2*time.Second),
				pod("c-1", ip1, "master", "", "replica", 110, 10),
				pod("c-2", ip2, "slave", ip0, "replica", 100, 10),
			}},
			want: Action{Type: ActionLabelMaster, Pod: "c-1"},
		},
		{
			name: "failover step 6: repoint the replicas that follow anything else",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "", 120, 10), 2*time.Second),
				pod("c-1", ip1, "master", "", "master", 110, 10),
				pod("c-2", ip2, "slave", ip0, "replica", 100, 10),
			}},
			want: Action{Type: ActionRepoint, Pod: "c-2", Master: "c-1"},
		},
		{
			name: "failover: the old master answering again is fenced before completion",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				pod("c-0", ip0, "master", "", "", 130, 10),
				pod("c-1", ip1, "master", "", "master", 110, 10),
				pod("c-2", ip2, "slave", ip1, "replica", 110, 10),
			}},
			want: Action{Type: ActionFence, Pod: "c-0", Master: "c-1"},
		},
		{
			name: "failover step 7: complete",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "", 120, 10), 2*time.Second),
				pod("c-1", ip1, "master", "", "master", 110, 10),
				pod("c-2", ip2, "slave", ip1, "replica", 110, 10),
			}},
			want: Action{Type: ActionCompleteFailover, Pod: "c-1", Master: "c-0"},
		},
		{
			name: "failover whose target died chooses again, away from the old master",
			given: Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", Operation: failoverOp("c-0", "c-1"), Pods: []PodState{
				down(pod("c-0", ip0, "master", "", "", 120, 10), 2*time.Second),
				down(pod("c-1", ip1, "slave", ip0, "replica", 110, 10), 2*time.Second),
				pod("c-2", ip2, "slave", ip0, "replica", 100, 10),
			}},
			want: Action{Type: ActionStartFailover, Pod: "c-2", Master: "c-0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Next(steady(tt.given))
			got.Reason = ""
			NewWithT(t).Expect(got).To(Equal(tt.want))
		})
	}
}

// steady completes a topology test's snapshot: spec approved, the
// StatefulSet settled on it, every pod on its revision and Ready.
func steady(s Snapshot) Snapshot {
	if s.Approved != nil {
		return s
	}
	s.Name = "c"
	s.Spec = cachev1alpha1.RolloutValues{Replicas: int32(len(s.Pods)), Version: "7.0.15"}
	s.Approved = s.Spec.DeepCopy()
	s.StatefulSet = &StatefulSetState{Settled: true, TemplateKey: renderer.TemplateKey(s.Spec), Replicas: s.Spec.Replicas, UpdateRevision: "r1"}
	pods := make([]PodState, len(s.Pods))
	for i, p := range s.Pods {
		p.Revision, p.Ready = "r1", true
		pods[i] = p
	}
	s.Pods = pods
	return s
}

// TestAMasterNotSeenSinceARestartIsJudgedFromItsFirstFailure: the
// operator restarted and its first probes of the master fail (a busy
// machine): the master is down only once its probes have failed for
// longer than the timeout, not at the first failure.
func TestAMasterNotSeenSinceARestartIsJudgedFromItsFirstFailure(t *testing.T) {
	g := NewWithT(t)
	s := Snapshot{CurrentMaster: "c-0", AutoFailover: true, ProbeTimeout: time.Second, Now: now, Pods: healthyCluster()}
	s.Approved = &s.Spec
	m := down(s.Pods[0], 0)
	m.Obs.LastSeen = time.Time{}
	m.Obs.FailingSince = now.Add(-500 * time.Millisecond)
	s.Pods[0] = m
	g.Expect(s.down("c-0")).To(BeFalse(), "failing for half the timeout")
	g.Expect(Next(s).Type).NotTo(Equal(ActionStartFailover))
	s.Pods[0].Obs.FailingSince = now.Add(-1500 * time.Millisecond)
	g.Expect(s.down("c-0")).To(BeTrue(), "failing for longer than the timeout")
	g.Expect(Next(s).Type).To(Equal(ActionLastLook), "no probe waited the whole timeout yet")
	s.Pods[0].Obs.MissedWait = time.Second
	g.Expect(Next(s).Type).To(Equal(ActionStartFailover))
}

// TestRecheckAt: the controller is not woken by time passing, so the
// planner says when a rule that depends on the clock alone fires: a
// replica not Ready for RecreateAfter is recreated then. The master, a
// pod being deleted, a deadline already past and an upgrade (its own
// deadline judges the pods) give none.
func TestRecheckAt(t *testing.T) {
	notReady := func(name string, since time.Duration) PodState {
		p := pod(name, ip0, "slave", ip1, "replica", 10, 1)
		p.NotReadySince = now.Add(-since)
		return p
	}
	deleting := notReady("c-1", time.Second)
	deleting.Deleting = true
	for _, tc := range []struct {
		name  string
		given Snapshot
		want  time.Time
	}{
		{"all Ready", Snapshot{Now: now, RecreateAfter: time.Minute, CurrentMaster: "c-0", Pods: healthyCluster()}, time.Time{}},
		{"the sooner of two replicas", Snapshot{Now: now, RecreateAfter: time.Minute, CurrentMaster: "c-0", Pods: []PodState{
			notReady("c-0", 50*time.Second), notReady("c-1", 10*time.Second), notReady("c-2", 20*time.Second)}}, now.Add(40*time.Second + time.Millisecond)},
		{"already due", Snapshot{Now: now, RecreateAfter: time.Minute, CurrentMaster: "c-0", Pods: []PodState{notReady("c-1", 2*time.Minute)}}, time.Time{}},
		{"being deleted", Snapshot{Now: now, RecreateAfter: time.Minute, CurrentMaster: "c-0", Pods: []PodState{deleting}}, time.Time{}},
		{"recreation off", Snapshot{Now: now, CurrentMaster: "c-0", Pods: []PodState{notReady("c-1", time.Second)}}, time.Time{}},
		{"during an upgrade", Snapshot{Now: now, RecreateAfter: time.Minute, CurrentMaster: "c-0", Operation: &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationUpgrade},
			Pods: []PodState{notReady("c-1", time.Second)}}, time.Time{}},
		{"a password rotation ends", Snapshot{Now: now, RecreateAfter: time.Minute, CurrentMaster: "c-0", Pods: healthyCluster(), UsersRecheckAt: now.Add(20 * time.Second)},
			now.Add(20*time.Second + time.Millisecond)},
		{"a rotation ends before a recreation", Snapshot{Now: now, RecreateAfter: time.Minute, CurrentMaster: "c-0", Pods: []PodState{notReady("c-1", 10*time.Second)}, UsersRecheckAt: now.Add(5 * time.Second)},
			now.Add(5*time.Second + time.Millisecond)},
		{"a recreation before a rotation ends", Snapshot{Now: now, RecreateAfter: time.Minute, CurrentMaster: "c-0", Pods: []PodState{notReady("c-1", 10*time.Second)}, UsersRecheckAt: now.Add(time.Hour)},
			now.Add(50*time.Second + time.Millisecond)},
		{"a rotation ends during an upgrade", Snapshot{Now: now, CurrentMaster: "c-0", Operation: &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationUpgrade},
			Pods: healthyCluster(), UsersRecheckAt: now.Add(time.Second)}, now.Add(time.Second + time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(RecheckAt(tc.given)).To(Equal(tc.want))
		})
	}
}

// A master that came back as a replica of nobody is judged on looks at its
// replicas taken since it restarted: one from before shows the link up and
// hides what the replica holds, one that missed its probes is not compared
// at all, and either way the master was promoted (the scale benchmark's run
// 12). Each case: c-0 restarted 2 s ago (uptime 2) with a new history, so
// judged on fresh looks it lacks the replicas' writes.
func TestARestartedMasterIsJudgedOnLooksTakenSinceItsRestart(t *testing.T) {
	restarted := func() PodState {
		return linkDown(history(pod("c-0", ip0, "slave", cachev1alpha1.StartupMasterHost, "master", 0, 10), "B", "", 0, 2), 2)
	}
	// replica: c-N following c-0 under the old history A, its link down
	// since the kill 3 s ago, looked at now.
	replica := func(name, ip string, offset int64) PodState {
		return linkDown(history(pod(name, ip, "slave", ip0, "replica", offset, 10), "A", "", 0, 600), 3)
	}
	// before: a look from before the kill: link up, as it was.
	before := func(p PodState) PodState {
		p = probedAt(p, now.Add(-4*time.Second))
		p.Obs.MasterLinkUp, p.Obs.LinkDownSeconds = true, 0
		return p
	}
	// unanswered: p has not answered for missed, the wait in vain of its
	// most patient probe, sent right after it last answered.
	unanswered := func(p PodState, missed time.Duration) PodState {
		p.Obs.Reachable, p.Obs.LastSeen, p.Obs.MissedWait, p.Obs.MissedWaitSent = false, now.Add(-missed), missed, now.Add(-missed)
		return p
	}
	sentAt := func(p PodState, t time.Time) PodState {
		p.Obs.MissedWaitSent = t
		return p
	}
	tests := []struct {
		name string
		pods []PodState
		at   time.Time
		want Action
	}{{
		name: "replicas last looked at before the restart are looked at again",
		pods: []PodState{restarted(), before(replica("c-1", ip1, 1000)), before(replica("c-2", ip2, 1010))},
		want: Action{Type: ActionRefresh, Pods: []string{"c-1", "c-2"}},
	}, {
		name: "judged on the looks taken again, the master is failed over",
		pods: []PodState{restarted(), replica("c-1", ip1, 1000), replica("c-2", ip2, 1010)},
		want: Action{Type: ActionStartFailover, Pod: "c-2", Master: "c-0"},
	}, {
		// A frozen replica that thaws answers INFO before it reads its
		// closed link: its link looks up, to a master that refuses to be
		// anyone's sync source. (Before, such a look let the master be
		// promoted.)
		name: "a replica that still reports its link up to a master running as a replica of nobody has not noticed the restart: the master is failed over",
		// (Up 2 s, the master started 1 to 2 s ago: the looks, 0.5 s
		// old, are surely from after its start.)
		pods: []PodState{restarted(), probedAt(before(replica("c-1", ip1, 1000)), now.Add(-500*time.Millisecond)), probedAt(before(replica("c-2", ip2, 1010)), now.Add(-500*time.Millisecond))},
		want: Action{Type: ActionStartFailover, Pod: "c-2", Master: "c-0"},
	}, {
		name: "a replica that missed its probes gets a look that waits the whole probe timeout",
		pods: []PodState{restarted(), unanswered(replica("c-1", ip1, 1000), 500*time.Millisecond), unanswered(replica("c-2", ip2, 1010), 500*time.Millisecond)},
		want: Action{Type: ActionLastLook, Pod: "c-1"},
	}, {
		name: "while the look waits, the master is not promoted",
		pods: []PodState{restarted(), func() PodState {
			p := unanswered(replica("c-1", ip1, 1000), 500*time.Millisecond)
			p.Obs.LookingSince = now.Add(-100 * time.Millisecond)
			return p
		}(), replica("c-2", ip2, 900)},
		want: Action{Type: ActionWait, Pod: "c-1", OnAnswer: true, Until: now.Add(-100*time.Millisecond + 2*time.Second)},
	}, {
		// It holds writes the master lacks, but a replica gone for good
		// must not keep the cluster without a master.
		name: "a replica that missed a look that waited the whole probe timeout is down: the master lacking nothing else is promoted",
		pods: []PodState{restarted(), sentAt(unanswered(replica("c-1", ip1, 1000), 3*time.Second), now.Add(-time.Second))},
		want: Action{Type: ActionPromote, Pod: "c-0"},
	}, {
		// A Refresh after a step, say, waited the whole timeout for a
		// slow replica before the master restarted.
		name: "a replica whose patient look was sent before the master's start gets another",
		pods: []PodState{restarted(), unanswered(replica("c-1", ip1, 1000), 3*time.Second)},
		want: Action{Type: ActionLastLook, Pod: "c-1"},
	}, {
		// The operator restarted too: it never saw the replica answer,
		// so it knows neither its role nor whom it follows.
		name: "a replica that has not answered since the operator started gets a look",
		pods: []PodState{restarted(), {Name: "c-1", IP: ip1, RoleLabel: "replica", Observed: true, Obs: probe.Observation{
			Pod: "c-1", IP: ip1, ProbedAt: now, FailingSince: now.Add(-500 * time.Millisecond), MissedWait: 500 * time.Millisecond, MissedWaitSent: now}}},
		want: Action{Type: ActionLastLook, Pod: "c-1"},
	}, {
		name: "a replica with an address not probed yet is waited for",
		pods: []PodState{func() PodState { p := restarted(); p.Obs.UptimeSeconds = 0; return p }(), {Name: "c-1", IP: ipNew, RoleLabel: "replica"}},
		want: Action{Type: ActionWait, Pod: "c-1", OnAnswer: true},
	}, {
		// Each pod is probed on its own clock: after an operator
		// restart the master's first answer can come before the
		// replica's, long after the master's own restart.
		name: "a replica with an address not probed yet is waited for however long ago the master restarted",
		pods: []PodState{restarted(), {Name: "c-1", IP: ipNew, RoleLabel: "replica"}},
		want: Action{Type: ActionWait, Pod: "c-1", OnAnswer: true},
	}, {
		name: "a replica without an address is waited for up to the probe timeout after the restart",
		pods: []PodState{func() PodState { p := restarted(); p.Obs.UptimeSeconds = 0; return p }(), {Name: "c-1", RoleLabel: "replica"}},
		want: Action{Type: ActionWait, Pod: "c-1", OnAnswer: true, Until: now.Add(time.Second)},
	}, {
		name: "a replica without an address for the probe timeout after the restart is not waited for",
		pods: []PodState{restarted(), {Name: "c-1", RoleLabel: "replica"}},
		want: Action{Type: ActionPromote, Pod: "c-0"},
	}, {
		// Redis counts uptime in whole seconds: the master, up "2 s",
		// may have started 1.5 s ago, after this look was taken.
		name: "a replica's look from the second the master's uptime cannot place is taken again",
		pods: []PodState{restarted(), probedAt(before(replica("c-1", ip1, 1000)), now.Add(-1500*time.Millisecond))},
		want: Action{Type: ActionRefresh, Pods: []string{"c-1"}},
	}, {
		name: "a replica that restarted too holds nothing to compare: the master is promoted",
		pods: []PodState{restarted(), linkDown(history(pod("c-1", ip1, "slave", cachev1alpha1.StartupMasterHost, "replica", 0, 10), "C", "", 0, 2), 2)},
		want: Action{Type: ActionPromote, Pod: "c-0"},
	}, {
		// Each age is read from its own probe: the master, probed 4 s
		// after the replica, is 4 s older in its look than in the
		// replica's. Both say the run began when the link was lost (5 s
		// ago); compared as ages (5 s against 1 s) the master seemed to
		// have run since before.
		// (A promoted master, as a replica of nobody is judged without
		// times: it was no one's sync source in its run.)
		name: "the master's run and the replica's lost link are compared as times, not as ages from different looks",
		pods: []PodState{history(pod("c-0", ip0, "master", "", "master", 40, 10), "B", "", 0, 5),
			probedAt(linkDown(history(pod("c-1", ip1, "slave", ip0, "replica", 1000, 10), "A", "", 0, 600), 1), now.Add(-4*time.Second))},
		want: Action{Type: ActionStartFailover, Pod: "c-1", Master: "c-0"},
	}, {
		// The tolerance covers Redis's whole seconds (2 s), no more.
		name: "a master whose run began 3 s before the replica lost its link is not taken for one that restarted since",
		pods: []PodState{history(pod("c-0", ip0, "master", "", "master", 40, 10), "B", "", 0, 8),
			linkDown(history(pod("c-1", ip1, "slave", ip0, "replica", 1000, 10), "A", "", 0, 600), 5)},
		want: Action{Type: ActionNone},
	}, {
		// Frozen, it noticed the end of the run it followed only after
		// the master had restarted.
		name: "a replica that noticed late that its link was lost still holds writes a master running as a replica of nobody lacks",
		pods: []PodState{func() PodState { p := restarted(); p.Obs.UptimeSeconds = 8; return p }(),
			linkDown(history(pod("c-1", ip1, "slave", ip0, "replica", 1000, 10), "A", "", 0, 600), 1)},
		want: Action{Type: ActionStartFailover, Pod: "c-1", Master: "c-0"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Snapshot{Now: now, ProbeTimeout: time.Second, AutoFailover: true, CurrentMaster: "c-0", StepDeadline: time.Minute, Pods: tt.pods}
			if !tt.at.IsZero() {
				s.Now = tt.at
			}
			got := Next(steady(s))
			got.Reason = ""
			NewWithT(t).Expect(got).To(Equal(tt.want))
		})
	}
}
