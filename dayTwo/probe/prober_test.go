package probe

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/access"
)

func TestParseInfo(t *testing.T) {
	g := NewWithT(t)
	info := "# Server\r\nuptime_in_seconds:42\r\n# Replication\r\nrole:slave\r\nmaster_host:10.244.0.10\r\nmaster_port:6379\r\nmaster_link_status:up\r\nmaster_last_io_seconds_ago:3\r\nslave_repl_offset:1234\r\nmaster_replid:abc\r\nmaster_repl_offset:1300\r\n# Persistence\r\nloading:0\r\n# Keyspace\r\ndb0:keys=3,expires=0,avg_ttl=0\r\ndb1:keys=2,expires=1,avg_ttl=0\r\n"
	o := Observation{}
	parseInfo(info, &o)
	g.Expect(o).To(Equal(Observation{Role: "slave", MasterHost: "10.244.0.10", MasterLinkUp: true, MasterLastIOSeconds: 3, Offset: 1234, ReplID: "abc", Keys: 5, UptimeSeconds: 42}))

	m := Observation{}
	parseInfo("role:master\r\nconnected_slaves:2\r\nmaster_replid:def\r\nmaster_replid2:abc\r\nmaster_repl_offset:99\r\nsecond_repl_offset:51\r\n", &m)
	g.Expect(m.Offset).To(Equal(int64(99)))
	g.Expect(m.ConnectedReplicas).To(Equal(2))
	g.Expect([]any{m.ReplID, m.ReplID2, m.SecondReplOffset}).To(Equal([]any{"def", "abc", int64(51)}))

	r := Observation{}
	parseInfo("role:slave\r\nmaster_host:10.244.0.10\r\nmaster_link_status:down\r\nmaster_link_down_since_seconds:7\r\nslave_repl_offset:12\r\n", &r)
	g.Expect(r.LinkDownSeconds).To(Equal(int64(7)))
	g.Expect(r.MasterLastIOSeconds).To(Equal(int64(-1)), "not told: unknown, not just now")

	busy := Observation{}
	parseInfo("# Persistence\r\nrdb_bgsave_in_progress:1\r\naof_rewrite_in_progress:1\r\n", &busy)
	g.Expect(busy.Saving && busy.Rewriting).To(BeTrue(), "a SYNC to this pod waits")
}

const (
	ip0 = "10.244.0.10"
	ip1 = "10.244.0.11"
)

// TestProberTellsALostDatasetFromAnEmptiedOne: a new run of redis-server
// that is empty while the run before it held keys lost its data; a run
// that emptied (FLUSHALL) did not, nor did a new run that loaded its data.
func TestProberTellsALostDatasetFromAnEmptiedOne(t *testing.T) {
	g := NewWithT(t)
	cp := &clusterProbe{results: map[string]Observation{}, runs: map[string]run{}}
	see := func(runID string, keys int64) Observation {
		cp.record(Observation{Pod: "c-0", IP: ip0, Reachable: true, RunID: runID, Keys: keys})
		return cp.results["c-0"]
	}
	g.Expect(see("a", 0).LostData).To(BeFalse(), "a first run that is empty lost nothing")
	g.Expect(see("a", 10).LostData).To(BeFalse())
	g.Expect(see("b", 10).LostData).To(BeFalse(), "a restart that loaded its data")
	g.Expect(see("c", 0).LostData).To(BeTrue(), "a restart that came back empty")
	g.Expect(see("c", 0).LostData).To(BeTrue(), "stays lost while empty")
	g.Expect(see("c", 5).LostData).To(BeTrue(), "keys written since are not the data")
	// Synced as a replica from a pod that kept its data: the data is back.
	cp.record(Observation{Pod: "c-1", IP: ip1, Reachable: true, RunID: "k", Keys: 9, Role: "master"})
	cp.record(Observation{Pod: "c-0", IP: ip0, Reachable: true, RunID: "c", Keys: 9, Role: "slave", MasterHost: ip1, MasterLinkUp: true})
	g.Expect(cp.results["c-0"].LostData).To(BeFalse(), "synced from a pod that kept its data")
	g.Expect(see("c", 0).LostData).To(BeFalse(), "emptied while running: FLUSHALL")
	g.Expect(see("d", 0).LostData).To(BeFalse(), "a restart of an empty dataset lost nothing")
	cp.record(Observation{Pod: "c-0", IP: ip0, Reachable: true, RunID: "d", Keys: 7})
	cp.record(Observation{Pod: "c-0", IP: ip1, Reachable: false})
	g.Expect(see("e", 0).LostData).To(BeTrue(), "a pod recreated on a new volume, with another address")

	// A loss a person accepted is not found again; an ordinal scaled
	// away is forgotten.
	key := types.NamespacedName{Namespace: "ns", Name: "c"}
	p := &Prober{clusters: map[types.NamespacedName]*clusterProbe{key: cp}}
	p.AcceptLoss(key)
	g.Expect(cp.results["c-0"].LostData).To(BeFalse(), "accepted")
	g.Expect(see("e", 0).LostData).To(BeFalse(), "still accepted at the next probe")
	see("e", 3)
	p.ForgetRuns(key, func(pod string) bool { return pod != "c-0" })
	g.Expect(see("f", 0).LostData).To(BeFalse(), "a new pod on an ordinal that was scaled away")
}

// TestAPodsFailuresAreTimedFromTheFirst: the failures of a pod that does
// not answer are timed from the first of them, also when it has not
// answered since the prober started; an answer ends the run.
func TestAPodsFailuresAreTimedFromTheFirst(t *testing.T) {
	g := NewWithT(t)
	cp := &clusterProbe{results: map[string]Observation{}, runs: map[string]run{}}
	t0 := time.Now()
	fail := func(at time.Time) Observation {
		cp.record(Observation{Pod: "c-0", IP: ip0, ProbedAt: at})
		return cp.results["c-0"]
	}
	g.Expect(fail(t0).FailingSince).To(Equal(t0), "a first probe that fails")
	g.Expect(fail(t0.Add(time.Second)).FailingSince).To(Equal(t0))
	cp.record(Observation{Pod: "c-0", IP: ip0, ProbedAt: t0.Add(2 * time.Second), Reachable: true, LastSeen: t0.Add(2 * time.Second)})
	g.Expect(cp.results["c-0"].FailingSince.IsZero()).To(BeTrue())
	g.Expect(fail(t0.Add(3*time.Second)).FailingSince).To(Equal(t0.Add(3*time.Second)), "a new run of failures")
}

// TestTheLongestWaitInVainIsKept: an unreachable pod carries the longest
// deadline its probes waited in vain since it last answered, also from a
// patient look recorded after shorter periodic probes sent during it; an
// answer, even one recorded late, starts the waiting over.
func TestTheLongestWaitInVainIsKept(t *testing.T) {
	g := NewWithT(t)
	cp := &clusterProbe{results: map[string]Observation{}, runs: map[string]run{}}
	t0 := time.Now()
	miss := func(at time.Time, wait time.Duration) bool {
		return cp.record(Observation{Pod: "c-0", IP: ip0, ProbedAt: at, MissedWait: wait, Err: "i/o timeout"})
	}
	cp.record(Observation{Pod: "c-0", IP: ip0, ProbedAt: t0, Reachable: true, LastSeen: t0, Role: "master"})
	miss(t0.Add(250*time.Millisecond), 500*time.Millisecond)
	miss(t0.Add(500*time.Millisecond), 0) // held back by the backoff
	g.Expect(cp.results["c-0"].MissedWait).To(Equal(500 * time.Millisecond))
	g.Expect(cp.results["c-0"].MissedWaitSent).To(Equal(t0.Add(250*time.Millisecond)), "when the probe that waited it was sent")
	miss(t0.Add(750*time.Millisecond), 500*time.Millisecond)
	g.Expect(cp.results["c-0"].MissedWaitSent).To(Equal(t0.Add(750*time.Millisecond)), "the latest of the probes that waited as long")

	// A look of 1 s sent at 1.0 s, recorded after the periodic probe sent
	// at 1.25 s: stale, but its wait counts.
	miss(t0.Add(1250*time.Millisecond), 500*time.Millisecond)
	g.Expect(miss(t0.Add(time.Second), time.Second)).To(BeTrue(), "the planner hears of the longer wait")
	g.Expect(cp.results["c-0"].MissedWait).To(Equal(time.Second))
	g.Expect(cp.results["c-0"].MissedWaitSent).To(Equal(t0.Add(time.Second)), "the look was sent at 1.0 s")
	g.Expect(cp.results["c-0"].ProbedAt).To(Equal(t0.Add(1250*time.Millisecond)), "the newer probe stays the latest")
	miss(t0.Add(1500*time.Millisecond), 500*time.Millisecond)
	g.Expect(cp.results["c-0"].MissedWaitSent).To(Equal(t0.Add(time.Second)), "a shorter wait does not replace the look's")

	// The same look answering at 1.6 s instead: the pod is alive then,
	// and its answer is what the pod holds now, recorded whole.
	cp.results["c-0"] = Observation{Pod: "c-0", IP: ip0, ProbedAt: t0.Add(1250 * time.Millisecond), LastSeen: t0, MissedWait: 500 * time.Millisecond, FailingSince: t0.Add(250 * time.Millisecond), Role: "master", Offset: 10}
	g.Expect(cp.record(Observation{Pod: "c-0", IP: ip0, ProbedAt: t0.Add(time.Second), Reachable: true, LastSeen: t0.Add(1600 * time.Millisecond), Role: "slave", MasterHost: ip1, Offset: 20})).To(BeTrue())
	got := cp.results["c-0"]
	g.Expect(got.Reachable).To(BeTrue())
	g.Expect(got.LastSeen).To(Equal(t0.Add(1600 * time.Millisecond)))
	g.Expect(got.MissedWait).To(BeZero())
	g.Expect(got.FailingSince).To(BeZero())
	g.Expect([]any{got.Role, got.MasterHost, got.Offset}).To(Equal([]any{"slave", ip1, int64(20)}), "read from the answer, not kept from before it")
	// The periodic probe sent at 1.5 s fails after it: it was sent before
	// the answer came, and says nothing newer. The one sent at 1.75 s
	// fails: the pod is slow, and what it holds is still the answer's.
	miss(t0.Add(1500*time.Millisecond), 500*time.Millisecond)
	g.Expect(cp.results["c-0"].Reachable).To(BeTrue(), "a probe sent before the answer came")
	miss(t0.Add(1750*time.Millisecond), 500*time.Millisecond)
	got = cp.results["c-0"]
	g.Expect(got.Reachable).To(BeFalse())
	g.Expect([]any{got.Role, got.Offset, got.LastSeen}).To(Equal([]any{"slave", int64(20), t0.Add(1600 * time.Millisecond)}))

	// A stale answer older than the latest failure says nothing new.
	g.Expect(cp.record(Observation{Pod: "c-0", IP: ip0, ProbedAt: t0.Add(100 * time.Millisecond), Reachable: true, LastSeen: t0.Add(200 * time.Millisecond)})).To(BeFalse())

	cp.record(Observation{Pod: "c-0", IP: ip0, ProbedAt: t0.Add(2 * time.Second), Reachable: true, LastSeen: t0.Add(2 * time.Second)})
	miss(t0.Add(3*time.Second), 500*time.Millisecond)
	g.Expect(cp.results["c-0"].MissedWait).To(Equal(500*time.Millisecond), "a new run of failures starts from its own probes")
}

// TestAPodIsSlowWhileEveryMissedProbeRanOutOfTime: a pod that does not
// answer is slow while every probe since its last answer timed out; one
// refused (or held back by the backoff) makes it not slow until it
// answers again.
func TestAPodIsSlowWhileEveryMissedProbeRanOutOfTime(t *testing.T) {
	g := NewWithT(t)
	cp := &clusterProbe{results: map[string]Observation{}, runs: map[string]run{}}
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	miss := func(ms int, slow bool) bool {
		cp.record(Observation{Pod: "c-0", IP: ip0, ProbedAt: at(ms), MissedWait: 500 * time.Millisecond, Slow: slow})
		return cp.results["c-0"].Slow
	}
	answer := func(ms int) {
		cp.record(Observation{Pod: "c-0", IP: ip0, ProbedAt: at(ms), Reachable: true, LastSeen: at(ms), Role: "master"})
	}
	answer(0)
	g.Expect(miss(250, true)).To(BeTrue())
	g.Expect(miss(500, true)).To(BeTrue())
	g.Expect(miss(750, false)).To(BeFalse(), "refused")
	g.Expect(miss(1000, true)).To(BeFalse(), "a refusal since the last answer")
	answer(1250)
	g.Expect(cp.results["c-0"].Slow).To(BeFalse())
	g.Expect(miss(1500, true)).To(BeTrue(), "a new run of failures")
}

// TestAPodThatStopsAnsweringKeepsItsLastAnswer: what a pod held, and
// whether its replication link was up and it was loading when it last
// answered, are kept while it does not answer (the planner compares a
// replica heard with its link down after its master fell silent).
func TestAPodThatStopsAnsweringKeepsItsLastAnswer(t *testing.T) {
	g := NewWithT(t)
	cp := &clusterProbe{results: map[string]Observation{}, runs: map[string]run{}}
	t0 := time.Now()
	for _, linkUp := range []bool{true, false} {
		cp.record(Observation{Pod: "c-1", IP: ip0, ProbedAt: t0, Reachable: true, LastSeen: t0, Role: "slave", MasterHost: ip1, MasterLinkUp: linkUp, Offset: 42, Keys: 7})
		cp.record(Observation{Pod: "c-1", IP: ip0, ProbedAt: t0.Add(time.Second), MissedWait: 500 * time.Millisecond, Slow: true, Err: "i/o timeout"})
		o := cp.results["c-1"]
		g.Expect(o.Reachable).To(BeFalse())
		g.Expect(o.LastSeen).To(Equal(t0))
		g.Expect([]any{o.Role, o.MasterHost, o.MasterLinkUp, o.Offset, o.Keys, o.Loading}).To(Equal([]any{"slave", ip1, linkUp, int64(42), int64(7), false}))
		t0 = t0.Add(2 * time.Second)
	}
}

// TestAProbeThatFailedBeforeAnAnswerDoesNotUndoIt: a look sent at 0 ms
// answers at 1,300 ms, after the periodic probes sent at 250 and 1,000 ms
// were sent; the one sent at 1,000 ms fails after the answer came. The pod
// answers until a probe sent after its answer fails.
func TestAProbeThatFailedBeforeAnAnswerDoesNotUndoIt(t *testing.T) {
	g := NewWithT(t)
	cp := &clusterProbe{results: map[string]Observation{}, runs: map[string]run{}}
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	miss := func(ms int) bool {
		cp.record(Observation{Pod: "c-1", IP: ip0, ProbedAt: at(ms), MissedWait: 500 * time.Millisecond, Slow: true, Err: "i/o timeout"})
		return cp.results["c-1"].Reachable
	}
	cp.record(Observation{Pod: "c-1", IP: ip0, ProbedAt: at(-500), Reachable: true, LastSeen: at(-500), Role: "slave"})
	g.Expect(miss(250)).To(BeFalse())
	cp.record(Observation{Pod: "c-1", IP: ip0, ProbedAt: at(0), Reachable: true, LastSeen: at(1300), Role: "slave", Offset: 7})
	g.Expect(cp.results["c-1"].Reachable).To(BeTrue(), "the look's answer")
	g.Expect(miss(1000)).To(BeTrue(), "a probe sent before the answer came")
	g.Expect(cp.results["c-1"].LastSeen).To(Equal(at(1300)))
	g.Expect(miss(1500)).To(BeFalse(), "a probe sent after it")
	g.Expect(cp.results["c-1"].Offset).To(Equal(int64(7)))
	// A look sent at 1,200 ms, before the answer came, fails after the
	// probe sent at 1,500 ms: its longer wait is not kept either.
	cp.record(Observation{Pod: "c-1", IP: ip0, ProbedAt: at(1200), MissedWait: 2 * time.Second, Slow: true, Err: "i/o timeout"})
	g.Expect(cp.results["c-1"].MissedWait).To(Equal(500*time.Millisecond), "a wait that began before the answer")
	g.Expect(cp.results["c-1"].MissedWaitSent).To(Equal(at(1500)))
}

// TestOnlyAMasterThatDoesNotAnswerWakesEveryRound: the controller is
// woken when a pod's answer changes; a master that does not answer wakes
// it every round (its failure is timed), while a replica that stays down,
// or a pod that has not answered yet, wakes it when that begins and ends,
// not every period.
func TestOnlyAMasterThatDoesNotAnswerWakesEveryRound(t *testing.T) {
	g := NewWithT(t)
	cp := &clusterProbe{results: map[string]Observation{}, runs: map[string]run{}}
	t0 := time.Now()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 250 * time.Millisecond) }
	answer := func(pod, ip, role string, i int) bool {
		return cp.record(Observation{Pod: pod, IP: ip, Reachable: true, LastSeen: at(i), ProbedAt: at(i), Role: role, RunID: pod})
	}
	silent := func(pod, ip string, i int) bool {
		return cp.record(Observation{Pod: pod, IP: ip, ProbedAt: at(i), Err: "i/o timeout"})
	}

	g.Expect(silent("c-2", ip1, 0)).To(BeTrue(), "a pod's first probe is news")
	g.Expect(silent("c-2", ip1, 1)).To(BeFalse(), "a pod still starting is not news")
	g.Expect(answer("c-2", ip1, "slave", 2)).To(BeTrue(), "its first answer is")

	g.Expect(answer("c-1", ip0, "slave", 0)).To(BeTrue())
	g.Expect(answer("c-1", ip0, "slave", 1)).To(BeFalse(), "the same answer is not news")
	g.Expect(silent("c-1", ip0, 2)).To(BeTrue(), "a replica that stops answering is news")
	g.Expect(silent("c-1", ip0, 3)).To(BeFalse(), "a replica that stays down is not, every round")
	g.Expect(answer("c-1", ip0, "slave", 4)).To(BeTrue(), "its answer is")

	g.Expect(answer("c-0", "10.244.0.12", "master", 0)).To(BeTrue())
	for i := 1; i <= 8; i++ {
		g.Expect(silent("c-0", "10.244.0.12", i)).To(BeTrue(), "a master that does not answer, round %d", i)
	}
	g.Expect(cp.masterUnreachable()).To(BeTrue())
}

// TestAWakeUpThatFindsTheChannelFullIsSentLater: the controller plans a
// waiting cluster again only when woken (or at its routine recheck), so a
// wake-up is never dropped: one that finds the channel full goes with
// the next round.
func TestAWakeUpThatFindsTheChannelFullIsSentLater(t *testing.T) {
	g := NewWithT(t)
	p := &Prober{events: make(chan event.TypedGenericEvent[Wake], 1), clusters: map[types.NamespacedName]*clusterProbe{}}
	defer p.Stop()
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	p.events <- event.TypedGenericEvent[Wake]{Object: Wake{Key: other}}
	cc := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	key := types.NamespacedName{Namespace: "ns", Name: "c"}
	// Nothing listens there: every probe fails at once, and only the
	// first one is news.
	p.Ensure(cc, []Target{{Pod: "c-0", IP: "127.0.200.9"}}, access.Config{}, 20*time.Millisecond)
	g.Eventually(func() int { return len(p.Observations(key)) }).Should(Equal(1))
	time.Sleep(100 * time.Millisecond)
	g.Expect((<-p.Events()).Object.Key).To(Equal(other))
	g.Eventually(p.Events()).Should(Receive(HaveField("Object.Key", key)), "the wake-up owed since the first round")
	g.Consistently(p.Events(), 200*time.Millisecond).ShouldNot(Receive(), "and nothing more: the pod's silence did not change")
}
