package daytwo_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// The day-two controller against a real API server and real redis-server
// processes: each test asserts on what Redis reports (INFO replication,
// the keys) and on what the cluster's status and pod labels say. Every
// test has its own namespace and loopback /24 (127.0.<subnet>.0).

func without(pods []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(pods), func(p string) bool { return p == name })
}

func (c *cluster) mergePatch(obj client.Object, patch string) {
	c.t.Helper()
	must(c.t, k8s.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(patch))))
}

// Three pods that answer and no status: one becomes master, in the status,
// in Redis and in its label; the other two replicate from it.
func TestIntegrationBootstrap(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{subnet: 20, pods: 3})
	g := NewWithT(t)
	master := c.waitReplicating(g)
	g.Eventually(func(g Gomega) {
		g.Expect(c.events(g)[cachev1alpha1.EventMasterElected]).To(ContainElement(ContainSubstring(master)))
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
}

// The master's redis-server is killed under acknowledged writes: a replica
// takes over with every acknowledged write, and the old master, started
// again on its data, follows the new one.
func TestIntegrationFailover(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{subnet: 21, pods: 3})
	g := NewWithT(t)
	old := c.waitReplicating(g)
	labels := c.watchMasterLabels()
	w := c.startWriter()
	w.waitAcked(g, 200)

	c.redis[old].kill()
	var master string
	g.Eventually(func(g Gomega) {
		master = c.get(g).Status.CurrentMaster
		g.Expect(master).NotTo(Or(BeEmpty(), Equal(old)), "status.currentMaster")
		c.expectReplicating(g, master, without(c.pods, old))
		g.Expect(c.roleLabels(g)[old]).NotTo(Equal(cachev1alpha1.RoleMaster), old)
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.events(g)[cachev1alpha1.EventFailoverCompleted]).To(ContainElement(ContainSubstring(fmt.Sprintf("%s→%s", old, master))))
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	w.waitAcked(g, 50)

	// The old master comes back on its own data (its AOF): it is fenced,
	// follows the new master, and the master stays where it is.
	c.redis[old].start(t)
	g.Eventually(func(g Gomega) { c.expectReplicating(g, master, c.pods) }).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	w.waitAcked(g, 50)
	checked, lost := w.lostOn(g, master)
	t.Logf("failover %s→%s; %d acknowledged writes checked on %s", old, master, checked, master)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	g.Expect(labels.Max()).To(Equal(1), "two pods carried the master label at once")
}

// Two failovers in a row while one replica has not linked to the first
// new master (seen in the fleet benchmark): the old master comes back,
// resynchronises from the first new master and is promoted when that one
// dies. The replica left behind still holds an older part of the same
// stream; the promoted master holds more, and stays master. (It was taken
// for a master that restarted with less history and failed over to the
// replica left behind, which dropped every write since the first
// failover.) The replicas cannot log in to a new master (a wrong
// masterauth) until the old master has come back, so one of them is
// surely left behind.
func TestIntegrationAReplicaLeftBehindDoesNotUndoAFailover(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{subnet: 34, pods: 3})
	g := NewWithT(t)
	ctx := context.Background()
	first := c.waitReplicating(g)
	w := c.startWriter()
	w.waitAcked(g, 200)
	masterauth := func(pod, password string) {
		rc := redisAt(c.ips[pod], c.password)
		defer rc.Close()
		g.Expect(rc.ConfigSet(ctx, "masterauth", password).Err()).To(Succeed(), pod)
	}
	for _, p := range without(c.pods, first) {
		masterauth(p, "wrong")
	}

	c.redis[first].kill()
	second := c.masterOtherThan(g, first)
	behind := without(without(c.pods, first), second)[0]
	// The old master comes back on its AOF (with the right masterauth) and
	// follows the second master; writes are acknowledged again.
	c.redis[first].start(t)
	g.Eventually(func(g Gomega) {
		r := c.info(g, first)
		g.Expect(r["master_host"]).To(Equal(c.ips[second]), first)
		g.Expect(r["master_link_status"]).To(Equal("up"), first)
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	w.waitAcked(g, 100)
	g.Expect(c.info(g, behind)["master_link_status"]).To(Equal("down"), behind+" is left behind")

	c.redis[second].kill()
	g.Eventually(func(g Gomega) {
		g.Expect(c.events(g)[cachev1alpha1.EventFailoverCompleted]).To(ContainElement(ContainSubstring(fmt.Sprintf("%s→%s", second, first))))
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	c.redis[second].start(t)
	w.waitAcked(g, 100)
	// Several probe periods with the replica left behind still behind: the
	// master stays.
	time.Sleep(2 * time.Second)
	g.Expect(c.events(g)[cachev1alpha1.EventFailoverStarted]).To(HaveLen(2), "failovers started")
	g.Expect(c.get(g).Status.CurrentMaster).To(Equal(first), "status.currentMaster")
	g.Expect(c.info(g, behind)["master_link_status"]).To(Equal("down"), behind+" is still left behind")

	masterauth(behind, c.password)
	g.Eventually(func(g Gomega) { c.expectReplicating(g, first, c.pods) }).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	w.waitAcked(g, 50)
	checked, lost := w.lostOn(g, first)
	t.Logf("failovers %s→%s→%s with %s left behind; %d acknowledged writes checked on %s", first, second, first, behind, checked, first)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
}

// probeTimeout is a spec with spec.highAvailability.probeTimeoutSeconds.
func probeTimeout(seconds int32) func(*cachev1alpha1.CacheClusterSpec) {
	return func(s *cachev1alpha1.CacheClusterSpec) { s.HighAvailability.ProbeTimeoutSeconds = seconds }
}

// A master that stops answering for longer than the probe timeout but
// answers the last look taken before a failover (it was slow, as on a
// loaded node) stays master: no failover, a MasterSlow Event, the writes
// go on. Probe timeout 2 s: the master is judged down 1.5–2 s after it
// froze, and the last look waits 2 s more; it runs again at 2.6 s.
func TestIntegrationASlowMasterIsNotFailedOver(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{subnet: 33, pods: 3, spec: probeTimeout(2)})
	g := NewWithT(t)
	master := c.waitReplicating(g)
	w := c.startWriter()
	w.waitAcked(g, 200)

	thaw := c.freeze(g, master)
	time.Sleep(2600 * time.Millisecond)
	thaw()

	g.Eventually(func(g Gomega) {
		g.Expect(c.events(g)[cachev1alpha1.EventMasterSlow]).To(ContainElement(ContainSubstring(master + " missed its probes for more than 2s")))
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	w.waitAcked(g, 100)
	g.Expect(c.get(g).Status.CurrentMaster).To(Equal(master))
	g.Expect(c.events(g)).NotTo(HaveKey(cachev1alpha1.EventFailoverStarted))
	c.expectReplicating(g, master, c.pods)
	checked, lost := w.lostOn(g, master)
	t.Logf("%d acknowledged writes checked on %s", checked, master)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
}

// A master the operator cannot hear (every answer held back 30 s, longer
// than any probe waits) while its replicas still receive its stream (a
// client writes to it directly, past the holding) is alive to its
// replicas: once it has missed the look it is judged on, a replica that
// answers with its link up and heard from it since that look was sent
// gets it another look (plan.heardByReplicas) and a MasterSlow Event,
// instead of a failover at once. It stays cut off from the operator and
// from the clients that reach it through its address, so after
// aliveGraceTimeouts probe timeouts since it last answered (12 s here) it
// is failed over all the same. (The planner before that rule failed it
// over as soon as its look ran out, and never sent that Event.) Every
// acknowledged write is on the new master, and one pod at most carries
// the master label at any time.
func TestIntegrationAMasterItsReplicasHearIsLookedAtAgainBeforeAFailover(t *testing.T) {
	t.Parallel()
	// 3 s: the replicas' word counts from a probe sent over a second
	// after the master's look, and must come before that look ends.
	c := newCluster(t, clusterOpts{subnet: 47, pods: 3, spec: probeTimeout(3)})
	g := NewWithT(t)
	ctx := context.Background()
	old := c.waitReplicating(g)
	labels := c.watchMasterLabels()
	w := c.startWriter()
	w.waitAcked(g, 200)

	lag := c.lag(g, old, 30*time.Second)
	cutAt := time.Now()
	// The master keeps streaming to its replicas: a client at its own
	// port, not held back, writes all the time.
	direct := redisAtPort(c.ips[old], lagPort, c.password)
	defer direct.Close()
	stop, busy := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(busy)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			_ = direct.Set(ctx, fmt.Sprintf("direct:%06d", i), i, 0).Err()
		}
	}()
	defer func() { close(stop); <-busy }()

	var startedAfter time.Duration
	g.Eventually(func(g Gomega) {
		cc := c.get(g)
		g.Expect(cc.Status.Operation != nil && cc.Status.Operation.Type == cachev1alpha1.OperationFailover || cc.Status.CurrentMaster != old).To(BeTrue())
		startedAfter = time.Since(cutAt)
	}).WithTimeout(2 * deadline).WithPolling(poll).Should(Succeed())
	var master string
	g.Eventually(func(g Gomega) {
		g.Expect(c.events(g)[cachev1alpha1.EventFailoverCompleted]).To(ContainElement(ContainSubstring(old + "→")))
		master = c.get(g).Status.CurrentMaster
	}).WithTimeout(2 * deadline).WithPolling(poll).Should(Succeed())
	g.Expect(c.events(g)[cachev1alpha1.EventMasterSlow]).To(ContainElement(ContainSubstring("it is alive to its replicas")),
		"a look again at the master its replicas heard")
	lag.set(0)
	g.Eventually(func(g Gomega) { c.expectReplicating(g, master, c.pods) }).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	w.waitAcked(g, 50)
	checked, lost := w.lostOn(g, master)
	t.Logf("failover %s→%s seen started %s after the operator was cut off from %s; %d acknowledged writes checked, %d lost",
		old, master, startedAfter.Round(time.Millisecond), old, checked, len(lost))
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	g.Expect(labels.Max()).To(Equal(1), "two pods carried the master label at once")
}

// The master is killed while both replicas answer late, as on a loaded
// node: 1.3 s after each request (their login excepted), later than their
// periodic probes wait (1 s, with a probe timeout of 2 s), sooner than the
// looks and the steps' own commands do (2 s). No replica answers a
// periodic probe, so none can be chosen on those: with the master surely
// down (it refuses), each replica gets a look that waits the whole
// timeout (plan.replicaLooks), answers it, and one takes over. (The
// planner before that rule waited "no replica can take over" for as long
// as the replicas answered late: here, for ever.) The target then answers
// only its looks, the refreshes and the steps' commands. Every
// acknowledged write is on the new master, and one pod at most carries
// the master label at any time.
func TestIntegrationAMasterIsFailedOverWhileItsReplicasAnswerLate(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{subnet: 45, pods: 3, spec: probeTimeout(2)})
	g := NewWithT(t)
	old := c.waitReplicating(g)
	var lags []*lagProxy
	for _, p := range without(c.pods, old) {
		lags = append(lags, c.lagAfterLogin(g, p, 1300*time.Millisecond))
	}
	labels := c.watchMasterLabels()
	w := c.startWriter()
	w.waitAcked(g, 200)
	// The replicas' periodic probes have failed.
	for _, l := range lags {
		g.Eventually(func() int { gaveUp, _ := l.counts(); return gaveUp }).WithTimeout(deadline).WithPolling(poll).
			Should(BeNumerically(">", 0), "probes given up")
	}

	c.redis[old].kill()
	var master string
	g.Eventually(func(g Gomega) {
		g.Expect(c.events(g)[cachev1alpha1.EventFailoverCompleted]).To(ContainElement(ContainSubstring(old + "→")))
		master = c.get(g).Status.CurrentMaster
	}).WithTimeout(2 * deadline).WithPolling(poll).Should(Succeed())
	for _, l := range lags {
		l.set(0)
	}
	g.Eventually(func(g Gomega) { c.expectReplicating(g, master, without(c.pods, old)) }).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	w.waitAcked(g, 50)
	c.redis[old].start(t)
	g.Eventually(func(g Gomega) { c.expectReplicating(g, master, c.pods) }).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	w.waitAcked(g, 50)
	checked, lost := w.lostOn(g, master)
	t.Logf("failover %s→%s while the replicas answered 1.3 s late; %d acknowledged writes checked, %d lost", old, master, checked, len(lost))
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	g.Expect(labels.Max()).To(Equal(1), "two pods carried the master label at once")
}

// The master is killed while one replica, r, answers late (1.3 s after
// each request, later than its periodic probes wait) and the other, t,
// answers at once but lacks the last writes: its link was cut while it
// was frozen, and the writes after that were acknowledged (WAIT 1) by r
// alone. t answers first; r must be heard before a target is chosen (a
// look that waits the whole timeout), and the one holding the most, r,
// takes over. (The planner before that rule chose t as soon as the master
// was surely down, and r, resynchronised in full from t, dropped the
// writes only it held.) Every acknowledged write is on the new master.
func TestIntegrationTheReplicaThatAnswersFirstDoesNotWinOverOneThatHoldsMore(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{subnet: 46, pods: 3, spec: probeTimeout(2)})
	g := NewWithT(t)
	ctx := context.Background()
	old := c.waitReplicating(g)
	replicas := without(c.pods, old)
	first, late := replicas[0], replicas[1]
	lag := c.lagAfterLogin(g, late, 1300*time.Millisecond)
	labels := c.watchMasterLabels()
	w := c.startWriter()
	w.waitAcked(g, 200)
	g.Eventually(func() int { gaveUp, _ := lag.counts(); return gaveUp }).WithTimeout(deadline).WithPolling(poll).
		Should(BeNumerically(">", 0), "probes of "+late+" given up")

	// first stops reading its link, then loses it: the writes from then
	// on are acknowledged by late alone.
	thaw := c.freeze(g, first)
	rc := redisAt(c.ips[old], c.password)
	defer rc.Close()
	list, err := rc.Do(ctx, "CLIENT", "LIST", "TYPE", "replica").Text()
	g.Expect(err).NotTo(HaveOccurred())
	cut := 0
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		for _, f := range strings.Fields(line) {
			if addr, ok := strings.CutPrefix(f, "addr="); ok && strings.HasPrefix(addr, c.ips[first]+":") {
				g.Expect(rc.Do(ctx, "CLIENT", "KILL", addr).Err()).To(Succeed())
				cut++
			}
		}
	}
	g.Expect(cut).To(Equal(1), "replication links of "+first+" cut")
	w.waitAcked(g, 50)

	c.redis[old].kill()
	thaw()
	var master string
	g.Eventually(func(g Gomega) {
		g.Expect(c.events(g)[cachev1alpha1.EventFailoverCompleted]).To(ContainElement(ContainSubstring(old + "→")))
		master = c.get(g).Status.CurrentMaster
	}).WithTimeout(2 * deadline).WithPolling(poll).Should(Succeed())
	lag.set(0)
	g.Eventually(func(g Gomega) { c.expectReplicating(g, master, replicas) }).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	w.waitAcked(g, 50)
	checked, lost := w.lostOn(g, master)
	t.Logf("failover %s→%s (%s answered first, %s held the last writes); %d acknowledged writes checked, %d lost", old, master, first, late, checked, len(lost))
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	g.Expect(master).To(Equal(late), "the replica holding the most took over")
	g.Expect(labels.Max()).To(Equal(1), "two pods carried the master label at once")
}

// A master killed and restarted in place while its replicas are frozen, as
// on a loaded node where they miss their probes: it comes back as a
// replica of nobody, with a new history and without its last writes (cut
// from its append-only file), which the replicas acknowledged. It must not
// be promoted on the replicas' looks from before the kill (their link up)
// or for want of their answers: they would resynchronise from it in full
// and drop those writes. (The scale benchmark's run 12 saw such a
// promotion; only Redis's 5 s diskless-sync delay, 0 here, saved the
// data.) The replicas thaw within the probe timeout (6 s here, so that on
// a loaded machine a look that waits it surely outlasts the freeze while
// the operator without the rule has surely promoted the master); one of
// them takes over and no acknowledged write is lost.
func TestIntegrationARestartedMasterIsJudgedOnItsReplicasLooksSinceTheRestart(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{subnet: 35, pods: 3, spec: probeTimeout(6)})
	g := NewWithT(t)
	first := c.waitReplicating(g)
	w := c.startWriter()
	w.waitAcked(g, 500)

	thaw := c.freeze(g, without(c.pods, first)...)
	cut := c.restartWithoutLastWrites(g, first, 200)
	// The operator's prober has sent INFO to the restarted process when
	// a connection shows it (the prober's is the only one that sends
	// INFO). Its round of probes ends when the frozen replicas' probes
	// time out, two probe periods (3 s) later, and without the rule the
	// operator promotes the process then. The replicas thaw 1.5 s after
	// that, and 1.5 s before the earliest look at them that waits the
	// probe timeout (6 s) gives up: one sent, or a Refresh started, as
	// soon as the operator saw the restart.
	g.Eventually(func(g Gomega) {
		rc := redisAt(c.ips[first], c.password)
		defer rc.Close()
		list, err := rc.ClientList(context.Background()).Result()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list).To(ContainSubstring("cmd=info"), "the operator's probe of the restarted process")
	}).WithTimeout(deadline).WithPolling(20 * time.Millisecond).Should(Succeed())
	time.Sleep(4500 * time.Millisecond)
	role := c.info(g, first)["role"]
	thaw()

	second := c.failedOverFrom(g, first)
	w.waitAcked(g, 100)
	checked, lost := w.lostOn(g, second)
	t.Logf("cut %d bytes of %s's append-only file; %s's role while its replicas were frozen: %s; failed over to %s; %d acknowledged writes checked, %d lost",
		cut, first, first, role, second, checked, len(lost))
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	g.Expect(role).To(Equal("slave"), first+" is not promoted while its replicas do not answer")
}

// A master killed and restarted in place, as a replica of nobody without
// its last writes (cut from its append-only file), while one replica is
// slow: it answers every request, but late, as on a loaded node. The
// operator waits for a look at that replica, sent after the restart, that
// waits the whole probe timeout (14 s here, so the probe period is 2 s and
// a periodic probe waits 4 s); the test proxies the replica's answers 5 s
// late (lag), so a probe on a new connection (AUTH, then INFO) is answered
// after 10 s: every periodic probe fails, every look is answered (4 s to
// spare), and each look's answer comes after a periodic probe sent while
// it waited has failed (the replica's periodic probes follow each other
// 4 s apart while they fail, so one starts within 4 s of the look and has failed
// within 8 s: 2 s to spare). The look's answer is the replica's newest
// word and must be recorded whole: the replica is judged, the master
// failed over. (Recorded
// as stale, it left the replica unreachable and without a look since the
// restart, so the look was sent again, round after round, and the cluster
// stayed without a master until the pods were recreated after 5 minutes.
// A replica frozen and thawed by turns cannot show it: when it runs again
// it answers the periodic probe in flight too, which is newer.) The
// failover starts while the replica is still slow (the master's own
// probes, each pod on its own clock, see the restart within 4 s of it,
// and the look's answer comes 10 s later; a reconcile that reads the replica after the periodic probe in
// flight failed, 0–4 s after the look's answer, looks again:
// lookDeadline; the pods here, always Ready, are never recreated); then
// it answers at once again, and no acknowledged write is lost. A look
// must have been answered, not timed out: a replica that misses it is
// taken for down, and the master is judged without it.
func TestIntegrationARestartedMasterIsJudgedOnASlowReplicasLateAnswer(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{subnet: 36, pods: 3, spec: probeTimeout(14)})
	g := NewWithT(t)
	first := c.waitReplicating(g)
	w := c.startWriter()
	w.waitAcked(g, 500)

	slow := without(c.pods, first)[0]
	lag := c.lag(g, slow, 5*time.Second)
	// The operator's periodic probe of the slow replica has failed: it is
	// unreachable before the master's restart.
	g.Eventually(func() int { gaveUp, _ := lag.counts(); return gaveUp }).WithTimeout(deadline).WithPolling(poll).
		Should(BeNumerically(">", 0), "probes of "+slow+" given up")

	cut := c.restartWithoutLastWrites(g, first, 200)

	var role string
	g.Eventually(func(g Gomega) {
		cc := c.get(g)
		op := cc.Status.Operation
		g.Expect(cc.Status.CurrentMaster != first || (op != nil && op.Type == cachev1alpha1.OperationFailover && op.FromPod == first)).
			To(BeTrue(), "a failover from %s while %s answers late (status.currentMaster %q, status.operation %+v)", first, slow, cc.Status.CurrentMaster, op)
		role = c.info(g, first)["role"]
	}).WithTimeout(lookDeadline).WithPolling(poll).Should(Succeed())
	gaveUp, answered := lag.counts()
	lag.set(0)

	second := c.failedOverFrom(g, first)
	w.waitAcked(g, 100)
	checked, lost := w.lostOn(g, second)
	t.Logf("cut %d bytes of %s's append-only file; while %s answered late, %d of its connections gave up and %d got their answer (the looks), and %s's role was %s; failed over to %s; %d acknowledged writes checked, %d lost",
		cut, first, slow, gaveUp, answered, first, role, second, checked, len(lost))
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	g.Expect(role).To(Equal("slave"), first+" is not promoted while "+slow+" answers late")
	g.Expect(answered).To(BeNumerically(">", 0), "no connection to "+slow+" got an answer: the master was judged without a look answered late")
}

// A replica made master by hand is made a replica of the recorded master
// again, which stays master, and the clients connected to it are dropped
// (they would write to a replica otherwise).
func TestIntegrationFencing(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{subnet: 22, pods: 3})
	g := NewWithT(t)
	ctx := context.Background()
	master := c.waitReplicating(g)
	rogue := without(c.pods, master)[0]
	app := redisAt(c.ips[rogue], c.password)
	defer app.Close()
	id, err := app.ClientID(ctx).Result()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(app.Do(ctx, "REPLICAOF", "NO", "ONE").Err()).To(Succeed())
	g.Eventually(func(g Gomega) {
		c.expectReplicating(g, master, c.pods)
		rc := redisAt(c.ips[rogue], c.password)
		defer rc.Close()
		list, err := rc.ClientList(ctx).Result()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list).NotTo(ContainSubstring(fmt.Sprintf("id=%d ", id)), "the client of the rogue master is dropped")
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
}

// The switchover annotation moves the master to the named pod, losing no
// acknowledged write, and is removed once served.
func TestIntegrationSwitchover(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{subnet: 23, pods: 3})
	g := NewWithT(t)
	old := c.waitReplicating(g)
	target := without(c.pods, old)[1]
	labels := c.watchMasterLabels()
	w := c.startWriter()
	w.waitAcked(g, 200)

	c.mergePatch(&cachev1alpha1.CacheCluster{ObjectMeta: c.get(g).ObjectMeta},
		fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, cachev1alpha1.AnnotationSwitchoverTo, target))
	g.Eventually(func(g Gomega) {
		g.Expect(c.get(g).Annotations).NotTo(HaveKey(cachev1alpha1.AnnotationSwitchoverTo))
		c.expectReplicating(g, target, c.pods)
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.events(g)[cachev1alpha1.EventSwitchover]).To(ContainElement(ContainSubstring(target + " is the master (was " + old + ")")))
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	w.waitAcked(g, 50)
	checked, lost := w.lostOn(g, target)
	t.Logf("switchover %s→%s; %d acknowledged writes checked on %s", old, target, checked, target)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	g.Expect(labels.Max()).To(Equal(1), "two pods carried the master label at once")
}

// statusRecord is the part of one CacheCluster version a scale-down's
// order is judged on.
type statusRecord struct {
	Master   string
	Replicas int32 // status.rollout.replicas; 0 before the first approval
	Op       string
}

// A scale-down below the master's ordinal moves the master first; the
// smaller count reaches status.rollout (which day-one renders into the
// StatefulSet) only then.
func TestIntegrationScaleDownMovesTheMasterFirst(t *testing.T) {
	t.Parallel()
	// cache-2 alone holds data before the cluster exists: bootstrap makes
	// it the master, on the ordinal a scale to 2 removes.
	c := newCluster(t, clusterOpts{subnet: 24, pods: 3, beforeCreate: func(c *cluster) {
		rc := redisAt(c.ips["cache-2"], c.password)
		defer rc.Close()
		must(c.t, rc.Set(context.Background(), "seed", "1", 0).Err())
	}})
	g := NewWithT(t)
	old := c.waitReplicating(g)
	g.Expect(old).To(Equal("cache-2"), "bootstrap chooses the pod with data")

	var mu sync.Mutex
	var history []statusRecord
	c.watch(&cachev1alpha1.CacheClusterList{}, func(_ watch.EventType, o client.Object) {
		cc := o.(*cachev1alpha1.CacheCluster)
		r := statusRecord{Master: cc.Status.CurrentMaster}
		if ro := cc.Status.Rollout; ro != nil {
			r.Replicas = ro.Replicas
		}
		if op := cc.Status.Operation; op != nil {
			r.Op = string(op.Type) + "/" + op.Step
		}
		mu.Lock()
		history = append(history, r)
		mu.Unlock()
	})
	w := c.startWriter()
	w.waitAcked(g, 100)

	c.mergePatch(&cachev1alpha1.CacheCluster{ObjectMeta: c.get(g).ObjectMeta}, `{"spec":{"replicas":2}}`)
	g.Eventually(func(g Gomega) {
		ro := c.get(g).Status.Rollout
		g.Expect(ro).NotTo(BeNil())
		g.Expect(ro.Replicas).To(Equal(int32(2)), "status.rollout.replicas")
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	// When the smaller count is approved, the pod that goes is no master
	// in Redis any more.
	g.Expect(c.info(g, old)["role"]).To(Equal("slave"), old)

	// Day-one's part: the StatefulSet takes the count, its controller
	// removes the last pod.
	sts := &appsv1.StatefulSet{}
	must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: c.name}, sts))
	sts.Spec.Replicas = ptr.To(int32(2))
	must(t, k8s.Update(context.Background(), sts))
	c.settleStatefulSet()
	must(t, k8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: metaOf(c.ns, old)}))
	c.redis[old].kill()

	remaining := without(c.pods, old)
	var master string
	g.Eventually(func(g Gomega) {
		master = c.get(g).Status.CurrentMaster
		c.expectReplicating(g, master, remaining)
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	w.waitAcked(g, 50)
	_, lost := w.lostOn(g, master)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")

	mu.Lock()
	defer mu.Unlock()
	t.Logf("status history: %v", history)
	moved := slices.IndexFunc(history, func(r statusRecord) bool { return r.Master != "" && r.Master != old })
	shrunk := slices.IndexFunc(history, func(r statusRecord) bool { return r.Replicas == 2 })
	g.Expect(moved).To(BeNumerically(">=", 0), "the master moved")
	g.Expect(shrunk).To(BeNumerically(">", moved), "status.rollout.replicas shrank only after the master moved")
	for _, r := range history {
		if r.Replicas == 2 {
			g.Expect(r.Master).NotTo(Equal(old), "a version of the status approves 2 pods with the master on ordinal 2")
		}
	}
	g.Expect(history).To(ContainElement(HaveField("Op", string(cachev1alpha1.OperationScaling)+"/"+cachev1alpha1.StepSwitchover)), "the scale-down ran a switchover")
}

// A step that keeps failing is retried with backoff, counted by step and
// reason, and shown in the StepFailing condition; the condition goes once
// a step succeeds. The fault: one pod's Redis has no REPLICAOF command, so
// fencing it (a fresh pod believes it is master) fails every time.
func TestIntegrationAFailingStepIsShownAndCleared(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{subnet: 25, pods: 3, redisArgs: func(i int) []string {
		if i == 2 {
			return []string{"--rename-command", "REPLICAOF", ""}
		}
		return nil
	}})
	g := NewWithT(t)
	broken := c.pods[2]
	g.Eventually(func(g Gomega) {
		cond := meta.FindStatusCondition(c.get(g).Status.Conditions, cachev1alpha1.ConditionStepFailing)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(cachev1alpha1.ReasonStepError))
		g.Expect(cond.Message).To(And(ContainSubstring("Fence "+broken), ContainSubstring("unknown command"), ContainSubstring("times in a row")))
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	g.Expect(stepErrorCount(g, "Fence", "redis")).To(BeNumerically(">=", 3))

	// Fixed: the same pod's Redis, restarted without the fault.
	p := c.redis[broken]
	p.kill()
	p.extra = nil
	p.start(t)
	g.Eventually(func(g Gomega) {
		c.expectReplicating(g, c.get(g).Status.CurrentMaster, c.pods)
		g.Expect(meta.FindStatusCondition(c.get(g).Status.Conditions, cachev1alpha1.ConditionStepFailing)).To(BeNil())
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
}

// stepErrorCount reads cacheops_daytwo_step_errors_total{step,reason}.
func stepErrorCount(g Gomega, step, reason string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var n float64
	for _, f := range families {
		if f.GetName() != "cacheops_daytwo_step_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["step"] == step && labels["reason"] == reason {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// TestIntegrationAStatusConflictIsCountedAndPlannedAgain: the cluster
// changes between a reconcile's read and its status write (as when
// day-one or a person writes to it): the API server refuses the write, it
// is counted in cacheops_daytwo_status_conflicts_total, and the step is
// planned again on the fresh object: the cluster bootstraps all the same.
func TestIntegrationAStatusConflictIsCountedAndPlannedAgain(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	bump := &bumpingClient{}
	bump.armed.Store(true)
	before := statusConflictCount(g)
	c := newCluster(t, clusterOpts{subnet: 44, pods: 2, client: func(cl client.Client) client.Client { bump.Client = cl; return bump }})
	c.waitReplicating(g)
	g.Expect(bump.refused.Load()).To(BeTrue(), "the status write after the change was refused for a conflict")
	g.Expect(statusConflictCount(g)).To(BeNumerically(">", before))
}

// statusConflictCount sums cacheops_daytwo_status_conflicts_total over its
// steps.
func statusConflictCount(g Gomega) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var n float64
	for _, f := range families {
		if f.GetName() == "cacheops_daytwo_status_conflicts_total" {
			for _, m := range f.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// bumpingClient is the controller's client; once armed, the next status
// write of a CacheCluster through it finds the object changed since it
// was read: an annotation is written through the API server just before.
type bumpingClient struct {
	client.Client
	armed, refused atomic.Bool
}

func (b *bumpingClient) Status() client.SubResourceWriter {
	return bumpingStatus{SubResourceWriter: b.Client.Status(), b: b}
}

type bumpingStatus struct {
	client.SubResourceWriter
	b *bumpingClient
}

func (w bumpingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	cc, ok := obj.(*cachev1alpha1.CacheCluster)
	if !ok || !w.b.armed.CompareAndSwap(true, false) {
		return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	}
	changed := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Namespace: cc.Namespace, Name: cc.Name}}
	if err := k8s.Patch(ctx, changed, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"test.cacheops.io/changed":"true"}}}`))); err != nil {
		return err
	}
	err := w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	w.b.refused.Store(apierrors.IsConflict(err))
	return err
}

// laggingClient is the controller's client with a pod cache that stands
// still once armed, from just before the first pod patch sent through it
// (as after an API server restart, while the informers relist), and that
// counts those patches.
type laggingClient struct {
	client.Client
	mu      sync.Mutex
	armed   string // the namespace
	frozen  *corev1.PodList
	patches int
}

func (l *laggingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	l.mu.Lock()
	frozen := l.frozen
	l.mu.Unlock()
	if pods, ok := list.(*corev1.PodList); ok && frozen != nil {
		frozen.DeepCopyInto(pods)
		return nil
	}
	return l.Client.List(ctx, list, opts...)
}

func (l *laggingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*corev1.Pod); ok {
		l.mu.Lock()
		if l.armed != "" && l.frozen == nil {
			pods := &corev1.PodList{}
			if err := l.Client.List(ctx, pods, client.InNamespace(l.armed)); err != nil {
				l.mu.Unlock()
				return err
			}
			l.frozen = pods
		}
		if l.armed != "" {
			l.patches++
		}
		l.mu.Unlock()
	}
	return l.Client.Patch(ctx, obj, patch, opts...)
}

func (l *laggingClient) arm(ns string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed, l.frozen, l.patches = ns, nil, 0
}

func (l *laggingClient) thaw() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed, l.frozen = "", nil
	return l.patches
}

// A step is not taken again while the cache does not show its effect:
// with the pod cache standing still, a missing replica label is patched
// once, not on every reconcile (measured before expectations existed: the
// same label 173 times in about 3 s after an API server restart).
func TestIntegrationAStepWaitsForTheCacheToShowItsWrite(t *testing.T) {
	t.Parallel()
	lag := &laggingClient{}
	c := newCluster(t, clusterOpts{subnet: 26, pods: 3, client: func(cl client.Client) client.Client { lag.Client = cl; return lag }})
	g := NewWithT(t)
	ctx := context.Background()
	master := c.waitReplicating(g)
	replica := without(c.pods, master)[0]
	// The label goes (a person's kubectl edit); day-two puts it back,
	// while its cache keeps showing the pod without it for two seconds
	// (about 40 reconciles' worth).
	lag.arm(c.ns)
	pod := &corev1.Pod{}
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: replica}, pod))
	c.mergePatch(pod, fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, cachev1alpha1.LabelRole))
	g.Eventually(func(g Gomega) {
		g.Expect(c.roleLabels(g)[replica]).To(Equal(cachev1alpha1.RoleReplica))
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	time.Sleep(2 * time.Second)
	patches := lag.thaw()
	g.Expect(patches).To(Equal(1), "the label is patched once while the cache does not show it")
	g.Eventually(func(g Gomega) { c.expectReplicating(g, master, c.pods) }).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
}
