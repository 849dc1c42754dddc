package probe

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os/exec"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/access"
)

// The probe tests run real redis-server processes on 127.0.200.x, an
// address range no other package's tests use.

// server is one redis-server on ip:6379.
type server struct {
	ip, password, dir string
	cmd               *exec.Cmd
	// extra are more redis-server arguments.
	extra []string
}

func startServer(t *testing.T, ip, password string) *server {
	t.Helper()
	s := &server{ip: ip, password: password, dir: t.TempDir()}
	s.start(t)
	t.Cleanup(s.kill)
	return s
}

func (s *server) start(t *testing.T) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is needed (hack/install-deps.sh installs it): %v", err)
	}
	args := []string{"--bind", s.ip, "--port", "6379", "--protected-mode", "no", "--save", "", "--dir", s.dir}
	if s.password != "" {
		args = append(args, "--requirepass", s.password)
	}
	args = append(args, s.extra...)
	s.cmd = exec.Command(bin, args...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", net.JoinHostPort(s.ip, "6379")); err == nil {
			c.Close()
			return
		}
		if i == 200 {
			t.Fatalf("redis-server on %s does not listen", s.ip)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (s *server) kill() {
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// connectionsReceived reads total_connections_received on a connection
// of its own (counted too).
func (s *server) connectionsReceived(t *testing.T) int {
	t.Helper()
	c := newConn(s.ip, access.Config{Password: s.password})
	defer c.close()
	info, err := c.do(context.Background(), encodeCommand("INFO", "stats"), time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_connections_received:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no total_connections_received in INFO stats")
	return 0
}

// TestProbesReuseOneConnection: a pod probed many times is dialed once.
func TestProbesReuseOneConnection(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, "127.0.200.1", "secret")
	c := newConn(s.ip, access.Config{Password: s.password})
	defer c.close()
	target := Target{Pod: "c-0", IP: s.ip}
	o := probe(context.Background(), c, target, time.Second, time.Second)
	g.Expect(o.Reachable).To(BeTrue(), o.Err)
	before := s.connectionsReceived(t)
	for range 20 {
		o = probe(context.Background(), c, target, time.Second, time.Second)
		g.Expect(o.Reachable).To(BeTrue(), o.Err)
		g.Expect(o.Role).To(Equal("master"))
		g.Expect(o.RunID).NotTo(BeEmpty())
	}
	// Only the connection that read the counter again was made since.
	g.Expect(s.connectionsReceived(t)).To(Equal(before + 1))
}

// TestAFrozenPodTimesOutOnAnOpenConnection: a process stopped while the
// connection is open answers nothing; the probe ends at its timeout as
// unreachable, as a new dial to it does, and the pod is seen again once
// it runs.
func TestAFrozenPodTimesOutOnAnOpenConnection(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, "127.0.200.2", "")
	c := newConn(s.ip, access.Config{})
	defer c.close()
	target := Target{Pod: "c-0", IP: s.ip}
	g.Expect(probe(context.Background(), c, target, time.Second, time.Second).Reachable).To(BeTrue())

	g.Expect(s.cmd.Process.Signal(syscall.SIGSTOP)).To(Succeed())
	o := probe(context.Background(), c, target, 200*time.Millisecond, time.Second)
	g.Expect(o.Reachable).To(BeFalse())
	g.Expect(o.Err).To(ContainSubstring("i/o timeout"))
	fresh := ProbeOnce(context.Background(), target, access.Config{}, 200*time.Millisecond)
	g.Expect(fresh.Reachable).To(BeFalse())
	g.Expect(fresh.Err).To(ContainSubstring("i/o timeout"), "a new connection times out alike")

	g.Expect(s.cmd.Process.Signal(syscall.SIGCONT)).To(Succeed())
	// The backoff lets the next dial through a period after the failure.
	c.retryAt = time.Time{}
	g.Expect(probe(context.Background(), c, target, time.Second, time.Second).Reachable).To(BeTrue())
}

// TestASlowPodAnswersAPatientLook: a process that answers later than a
// periodic probe waits, but within the probe timeout, fails the periodic
// probe and answers the look that waits the timeout; a refused connection
// fails that look at once.
func TestASlowPodAnswersAPatientLook(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, "127.0.200.10", "")
	target := Target{Pod: "c-0", IP: s.ip}
	c := newConn(s.ip, access.Config{})
	defer c.close()
	g.Expect(probe(context.Background(), c, target, time.Second, time.Second).Reachable).To(BeTrue())

	g.Expect(s.cmd.Process.Signal(syscall.SIGSTOP)).To(Succeed())
	o := probe(context.Background(), c, target, 200*time.Millisecond, time.Second)
	g.Expect(o.Reachable).To(BeFalse())
	g.Expect(o.MissedWait).To(Equal(200 * time.Millisecond))
	g.Expect(o.Slow).To(BeTrue(), "it ran out of time")
	// The process runs again 300 ms into a look that waits 5 s.
	thawed := time.AfterFunc(300*time.Millisecond, func() { _ = s.cmd.Process.Signal(syscall.SIGCONT) })
	defer thawed.Stop()
	look := ProbeOnce(context.Background(), target, access.Config{}, 5*time.Second)
	g.Expect(look.Reachable).To(BeTrue(), look.Err)
	g.Expect(look.MissedWait).To(BeZero())

	s.kill()
	start := time.Now()
	look = ProbeOnce(context.Background(), target, access.Config{}, 5*time.Second)
	g.Expect(look.Reachable).To(BeFalse())
	g.Expect(look.MissedWait).To(Equal(5*time.Second), "a refusal counts the whole deadline")
	g.Expect(look.Slow).To(BeFalse(), "a refusal is not slowness")
	g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), "and ends at once")
}

// TestARestartedPodIsSeenAtOnce: the connection of a server that was
// killed and started again is broken; the probe dials again and sees the
// new run, not a moment of unreachability a new connection would not
// have seen.
func TestARestartedPodIsSeenAtOnce(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, "127.0.200.3", "pw")
	c := newConn(s.ip, access.Config{Password: "pw"})
	defer c.close()
	target := Target{Pod: "c-0", IP: s.ip}
	first := probe(context.Background(), c, target, time.Second, time.Second)
	g.Expect(first.Reachable).To(BeTrue(), first.Err)
	s.kill()
	s.start(t)
	again := probe(context.Background(), c, target, time.Second, time.Second)
	g.Expect(again.Reachable).To(BeTrue(), again.Err)
	g.Expect(again.RunID).NotTo(Equal(first.RunID))
}

// TestADownPodIsRedialedWithBackoff: a pod that refuses connections is
// not dialed again before the backoff, which never exceeds
// maxRedialPeriods periods.
func TestADownPodIsRedialedWithBackoff(t *testing.T) {
	g := NewWithT(t)
	c := newConn("127.0.200.4", access.Config{})
	period := time.Hour
	_, err := c.do(context.Background(), infoCommand, time.Second, period)
	g.Expect(err).To(HaveOccurred())
	g.Expect(errors.Is(err, errBackoff)).To(BeFalse(), "the first attempt dials")
	_, err = c.do(context.Background(), infoCommand, time.Second, period)
	g.Expect(errors.Is(err, errBackoff)).To(BeTrue(), "the second waits")
	for range 10 {
		c.retryAt = time.Time{}
		_, _ = c.do(context.Background(), infoCommand, time.Second, period)
	}
	g.Expect(time.Until(c.retryAt)).To(BeNumerically("<=", maxRedialPeriods*period))

	// A wrong password is a failed attempt too.
	s := startServer(t, "127.0.200.5", "right")
	wrong := newConn(s.ip, access.Config{Password: "wrong"})
	_, err = wrong.do(context.Background(), infoCommand, time.Second, time.Second)
	g.Expect(err).To(MatchError(ContainSubstring("AUTH")))
	g.Expect(wrong.nc).To(BeNil())
}

func TestReadReply(t *testing.T) {
	for _, tc := range []struct {
		name, given, want, wantErr string
	}{
		{name: "bulk", given: "$5\r\nhello\r\n", want: "hello"},
		{name: "empty bulk", given: "$0\r\n\r\n", want: ""},
		{name: "bulk longer than the reader's buffer", given: "$1100\r\n" + strings.Repeat("x", 1100) + "\r\n", want: strings.Repeat("x", 1100)},
		{name: "simple", given: "+OK\r\n", want: "OK"},
		{name: "integer", given: ":42\r\n", want: "42"},
		{name: "error", given: "-NOAUTH Authentication required.\r\n", wantErr: "redis: NOAUTH Authentication required."},
		{name: "nil bulk", given: "$-1\r\n", wantErr: "malformed bulk length"},
		{name: "array", given: "*2\r\n$20\r\ncluster-node-timeout\r\n$4\r\n5000\r\n", want: "cluster-node-timeout\n5000\n"},
		{name: "empty array", given: "*0\r\n", want: ""},
		{name: "array too long", given: "*17\r\n", wantErr: "malformed array length"},
		{name: "array of arrays", given: "*1\r\n*1\r\n$1\r\na\r\n", wantErr: "malformed array length"},
		{name: "unknown type", given: "%1\r\n", wantErr: "unexpected reply type"},
		{name: "no CRLF after the bulk", given: "$2\r\nabXY", wantErr: "not ended by CRLF"},
		{name: "too long", given: "$99999999999\r\n", wantErr: "malformed bulk length"},
		{name: "cut short", given: "$10\r\nabc", wantErr: "EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := readReply(bufio.NewReaderSize(strings.NewReader(tc.given), 512))
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

// TestAProbeAllocatesOnlyTheAnswer: on an open connection a probe
// allocates the INFO answer and little else.
func TestAProbeAllocatesOnlyTheAnswer(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, "127.0.200.6", "")
	c := newConn(s.ip, access.Config{})
	defer c.close()
	ctx := context.Background()
	_, err := c.do(ctx, infoCommand, time.Second, time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := c.do(ctx, infoCommand, time.Second, time.Second); err != nil {
			t.Fatal(err)
		}
	})
	// The answer, and what the net package allocates for a deadline.
	g.Expect(allocs).To(BeNumerically("<=", 3))
}

// TestProberKeepsOneConnectionPerPodAndWakesUrgentlyForItsMaster: rounds
// of probes reuse one connection per pod; when the master stops
// answering, the wake-up says it is urgent.
func TestProberKeepsOneConnectionPerPodAndWakesUrgentlyForItsMaster(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, "127.0.200.7", "pw")
	p, cc, key := newTestProber(t)
	p.Ensure(cc, []Target{{Pod: "c-0", IP: s.ip}}, access.Config{Password: "pw"}, 20*time.Millisecond)
	g.Eventually(func() bool { return p.Observations(key)["c-0"].Reachable }).Should(BeTrue())
	first := <-p.Events()
	g.Expect(first.Object).To(Equal(Wake{Key: key}), "news, not trouble")
	before := s.connectionsReceived(t)
	seen := p.Observations(key)["c-0"].ProbedAt
	g.Eventually(func() time.Time { return p.Observations(key)["c-0"].ProbedAt }).Should(BeTemporally(">", seen.Add(200*time.Millisecond)), "ten rounds or more")
	g.Expect(s.connectionsReceived(t)).To(Equal(before+1), "only the counter's own connection")

	s.kill()
	g.Eventually(func() bool {
		for {
			select {
			case e := <-p.Events():
				if e.Object.Urgent {
					return true
				}
			default:
				return false
			}
		}
	}).Should(BeTrue())
}

// TestAClusterWithoutAddressesIsProbedWhenItGetsOne: a cluster whose
// pods have no address yet (not scheduled) does not tick every period;
// it waits for an address, and the first one set is probed at once, not
// a period later.
func TestAClusterWithoutAddressesIsProbedWhenItGetsOne(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, "127.0.200.8", "")
	p, cc, key := newTestProber(t)
	p.Ensure(cc, nil, access.Config{}, time.Hour)
	g.Consistently(p.Events(), 100*time.Millisecond).ShouldNot(Receive(), "nothing to probe, nothing to tell")
	g.Expect(p.Observations(key)).To(BeEmpty())

	p.Ensure(cc, []Target{{Pod: "c-0", IP: s.ip}}, access.Config{}, time.Hour)
	g.Eventually(func() bool { return p.Observations(key)["c-0"].Reachable }, time.Second).Should(BeTrue(),
		"probed when the address comes, not an hour later")
}

// TestALastLookRunsInTheBackground: Look returns at once; while the look
// waits for a frozen master the observation says so, a second Look does
// not send another; when the master runs again it answers the look, which
// is recorded, kept for TakeAnsweredLooks once, and wakes the controller.
func TestALastLookRunsInTheBackground(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, "127.0.200.11", "")
	p, cc, key := newTestProber(t)
	target := Target{Pod: "c-0", IP: s.ip}
	// One round now, the next an hour later: only the look probes.
	p.Ensure(cc, []Target{target}, access.Config{}, time.Hour)
	g.Eventually(func() bool { return p.Observations(key)["c-0"].Reachable }).Should(BeTrue())
	<-p.Events()

	g.Expect(s.cmd.Process.Signal(syscall.SIGSTOP)).To(Succeed())
	start := time.Now()
	p.Look(key, target, 5*time.Second)
	g.Expect(time.Since(start)).To(BeNumerically("<", time.Second), "Look does not wait for the answer")
	looking := p.Observations(key)["c-0"].LookingSince
	g.Expect(looking).NotTo(BeZero())
	p.Look(key, target, 5*time.Second)
	g.Expect(p.Observations(key)["c-0"].LookingSince).To(Equal(looking), "one look at a time")
	g.Expect(p.TakeAnsweredLooks(key)).To(BeEmpty())

	g.Expect(s.cmd.Process.Signal(syscall.SIGCONT)).To(Succeed())
	g.Eventually(p.Events()).WithTimeout(5 * time.Second).Should(Receive(Equal(event.TypedGenericEvent[Wake]{Object: Wake{Key: key, Urgent: true}})))
	o := p.Observations(key)["c-0"]
	g.Expect(o.LookingSince).To(BeZero())
	g.Expect(o.Reachable).To(BeTrue())
	g.Expect(o.LastSeen).To(BeTemporally(">", start))
	g.Expect(p.TakeAnsweredLooks(key)).To(Equal([]string{"c-0"}))
	g.Expect(p.TakeAnsweredLooks(key)).To(BeEmpty(), "taken once")

	// A killed master refuses the look: recorded as a full wait in vain.
	s.kill()
	p.Look(key, target, 5*time.Second)
	g.Eventually(p.Events()).WithTimeout(5 * time.Second).Should(Receive())
	o = p.Observations(key)["c-0"]
	g.Expect(o.Reachable).To(BeFalse())
	g.Expect(o.MissedWait).To(Equal(5 * time.Second))
	g.Expect(p.TakeAnsweredLooks(key)).To(BeEmpty())
}

// TestAnAnswerFromAnOldAddressIsNotRecorded: a refresh or a look sent to
// an address the pod no longer has (it came back elsewhere meanwhile)
// does not replace what the pod says at its new one, and a look wakes
// nobody.
func TestAnAnswerFromAnOldAddressIsNotRecorded(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, "127.0.200.14", "")
	p, cc, key := newTestProber(t)
	p.Ensure(cc, []Target{{Pod: "c-0", IP: s.ip}}, access.Config{}, time.Hour)
	g.Eventually(func() bool { return p.Observations(key)["c-0"].Reachable }).Should(BeTrue())
	<-p.Events()

	old := Target{Pod: "c-0", IP: "127.0.200.15"} // nothing listens there
	p.Refresh(context.Background(), key, old, time.Second)
	p.Look(key, old, time.Second)
	g.Consistently(p.Events(), 2*time.Second).ShouldNot(Receive(), "a look at an old address wakes nobody")
	o := p.Observations(key)["c-0"]
	g.Expect(o.IP).To(Equal(s.ip))
	g.Expect(o.Reachable).To(BeTrue())
	g.Expect(o.LookingSince).To(BeZero())
	g.Expect(p.TakeAnsweredLooks(key)).To(BeEmpty())
}

// TestASlowPodHoldsBackNoOtherPodsProbes: each pod is probed on its own
// clock and its answer recorded as it comes. While one pod takes its
// whole deadline (two periods) to fail, a fast pod in the same cluster is
// probed every period and its answers are recorded before the slow
// pod's first probe has ended. (Probed in rounds, the fast pod's answer
// waited for the round's slowest probe: a master's answer was recorded up
// to two periods late behind a slow replica, and it was probed only every
// second period.)
func TestASlowPodHoldsBackNoOtherPodsProbes(t *testing.T) {
	g := NewWithT(t)
	fast := startServer(t, "127.0.200.12", "")
	// The slow pod accepts connections and never answers.
	slow, err := net.Listen("tcp", "127.0.200.13:6379")
	g.Expect(err).NotTo(HaveOccurred())
	defer slow.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := slow.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()

	p, cc, key := newTestProber(t)
	const period = 2 * time.Second
	p.Ensure(cc, []Target{{Pod: "c-0", IP: fast.ip}, {Pod: "c-1", IP: "127.0.200.13"}}, access.Config{}, period)
	// Until the slow pod's first probe fails (at its deadline, two
	// periods), collect the times the fast pod's answers were sent.
	answered := map[time.Time]bool{}
	g.Eventually(func() bool {
		obs := p.Observations(key)
		if o, ok := obs["c-0"]; ok && o.Reachable {
			answered[o.ProbedAt] = true
		}
		_, slowEnded := obs["c-1"]
		return slowEnded
	}).WithTimeout(4 * period).WithPolling(10 * time.Millisecond).Should(BeTrue())
	g.Expect(len(answered)).To(BeNumerically(">=", 2), "the fast pod answered every period while the slow one's first probe waited two")
	o := p.Observations(key)["c-1"]
	g.Expect(o.Reachable).To(BeFalse())
	g.Expect(o.MissedWait).To(Equal(probeDeadlinePeriods * period))
}

// newTestProber returns a prober, stopped with the test, and the cluster
// ns/c it is to probe.
func newTestProber(t *testing.T) (*Prober, *cachev1alpha1.CacheCluster, types.NamespacedName) {
	p := NewProber()
	t.Cleanup(p.Stop)
	cc := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	return p, cc, types.NamespacedName{Namespace: cc.Namespace, Name: cc.Name}
}
