package daytwo_test

// The integration harness of the day-two controller: a real kube-apiserver
// and etcd (envtest, started once for the package, on first use), one real
// redis-server per "pod" on its own loopback address, and the day-two
// Reconciler alone in a controller-runtime manager per test. Pods are plain
// API objects whose status the test writes itself, as a kubelet would; the
// test plays day-one too where a step needs it (the StatefulSet's count).

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	daytwo "github.com/cacheops/cacheops/dayTwo"
	"github.com/cacheops/cacheops/dayTwo/probe"
	"github.com/cacheops/cacheops/renderer/controller"
	"github.com/cacheops/cacheops/test/aof"
)

// Waits of the integration tests, in one place. They bound polls; nothing
// asserts that anything is fast.
const (
	deadline = 30 * time.Second
	poll     = 25 * time.Millisecond
	// lookDeadline bounds a wait for a judgement that may take more than
	// one look at a slow pod: a look answered late is recorded, then
	// the periodic probe in flight fails 0–4 s after it (it was sent
	// later, so it is newer); a reconcile that reads the pod after that
	// sends another look (up to the probe timeout more).
	lookDeadline = 2 * deadline
)

var (
	scheme  = kruntime.NewScheme()
	envOnce sync.Once
	envErr  error
	testEnv *envtest.Environment
	restCfg *rest.Config
	k8s     client.WithWatch
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	code := m.Run()
	if testEnv != nil {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
		}
	}
	os.Exit(code)
}

// zapLevel keeps test output short; TEST_VERBOSE=1 shows the operator's logs.
func zapLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..")
}

// controlPlane starts envtest once for the package (the planner's unit
// tests in the same binary do not need it) and fails the test, as the
// renderer/controller suite does, when its binaries are missing.
func controlPlane(t *testing.T) {
	t.Helper()
	envOnce.Do(func() {
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			envErr = err
			return
		}
		if err := cachev1alpha1.AddToScheme(scheme); err != nil {
			envErr = err
			return
		}
		assets := os.Getenv("KUBEBUILDER_ASSETS")
		if assets == "" {
			assets = filepath.Join(repoRoot(), "bin")
		}
		for _, b := range []string{"kube-apiserver", "etcd"} {
			if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
				envErr = fmt.Errorf("envtest needs %s in %s: run `make tools` first", b, assets)
				return
			}
		}
		testEnv = &envtest.Environment{
			CRDDirectoryPaths:     []string{filepath.Join(repoRoot(), "charts", "cacheops", "crds")},
			ErrorIfCRDPathMissing: true,
			BinaryAssetsDirectory: assets,
		}
		restCfg, envErr = testEnv.Start()
		if envErr != nil {
			envErr = fmt.Errorf("starting envtest: %w", envErr)
			return
		}
		k8s, envErr = client.NewWithWatch(restCfg, client.Options{Scheme: scheme})
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
}

// startDayTwo runs the day-two controller, and only it, in a manager
// whose cache holds the test's namespace, with the label-filtered cache of
// cmd/manager. This is the one place that builds the Reconciler.
func startDayTwo(t *testing.T, ns string, o clusterOpts) {
	t.Helper()
	opts := controller.CacheOptions()
	opts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:  scheme,
		Cache:   opts,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// One manager per test, each with a controller of the same name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &daytwo.Reconciler{Prober: probe.NewProber(), Namespaces: opts.DefaultNamespaces}
	if o.client != nil {
		r.Client = o.client(mgr.GetClient())
	}
	if o.apiReader != nil {
		r.APIReader = o.apiReader(mgr.GetAPIReader())
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// redisProc is one pod's redis-server, on the pod's address, with its
// own data folder that outlives a kill.
type redisProc struct {
	ip, password, dir string
	// extra are more redis-server arguments (a test's fault).
	extra []string
	// bin is the server program: redis-server unless a test restarts the
	// pod on another engine (valkey-server).
	bin string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

func startRedis(t *testing.T, ip, password string, extra ...string) *redisProc {
	t.Helper()
	p := &redisProc{ip: ip, password: password, dir: t.TempDir(), extra: extra}
	p.start(t)
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("redis-server %s, last lines of its log:\n%s", ip, tail(filepath.Join(p.dir, "redis.log"), 15))
		}
	})
	return p
}

// start runs redis-server as the chart configures it (AOF on, protected
// mode off, the password from the Secret). Outgoing connections leave from
// the pod's own address, so a master sees each replica at its pod IP. A
// full sync starts at once instead of after Redis's 5 s wait for more
// replicas: a matter of time only, which each test would spend otherwise.
func (p *redisProc) start(t *testing.T) {
	t.Helper()
	if err := p.run(); err != nil {
		t.Fatal(err)
	}
}

// run is start, for a goroutine other than the test's: it returns what
// went wrong.
func (p *redisProc) run() error {
	program := cmp.Or(p.bin, "redis-server")
	bin, err := exec.LookPath(program)
	if err != nil {
		return fmt.Errorf("%s is needed (hack/install-deps.sh installs it): %w", program, err)
	}
	cmd := exec.Command(bin, "--bind", p.ip, "--bind-source-addr", p.ip, "--port", "6379",
		"--requirepass", p.password, "--masterauth", p.password, "--protected-mode", "no",
		"--dir", p.dir, "--appendonly", "yes", "--appenddirname", "appendonly", "--repl-diskless-sync-delay", "0",
		"--logfile", filepath.Join(p.dir, "redis.log"))
	cmd.Args = append(cmd.Args, p.extra...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	rc := redisAt(p.ip, p.password)
	defer rc.Close()
	end := time.Now().Add(deadline)
	for {
		select {
		case <-exited:
			return fmt.Errorf("%s on %s exited: %s", program, p.ip, tail(filepath.Join(p.dir, "redis.log"), 10))
		default:
		}
		if rc.Ping(context.Background()).Err() == nil {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s on %s does not answer", program, p.ip)
		}
		time.Sleep(poll)
	}
}

// stop ends the process with SIGTERM, as the kubelet stops a container:
// Redis shuts down (a master waits for its replicas to catch up) before
// it exits.
func (p *redisProc) stop() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(deadline):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// pid is the process's id.
func (p *redisProc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// freeze stops the pods' processes (SIGSTOP), as a loaded node or a
// stalled disk would: connections stay open, nothing answers. The thaw
// it returns (SIGCONT) may be called more than once; the test's cleanup
// calls it too.
func (c *cluster) freeze(g Gomega, pods ...string) (thaw func()) {
	for _, p := range pods {
		g.Expect(syscall.Kill(c.redis[p].pid(), syscall.SIGSTOP)).To(Succeed(), "freeze "+p)
	}
	var once sync.Once
	thaw = func() {
		once.Do(func() {
			for _, p := range pods {
				_ = syscall.Kill(c.redis[p].pid(), syscall.SIGCONT)
			}
		})
	}
	c.t.Cleanup(thaw)
	return thaw
}

// lagProxy stands on a pod's address in front of its redis-server and
// holds every answer back for a while (delay), as a loaded node or a slow
// network would: a client that sends one request at a time, as the
// operator's prober does, gets each answer that long after the server
// answered it, whatever other connections wait. (On one connection the
// chunks the server sends are held one after another: pipelined answers,
// or replication traffic, wait a delay each.) A frozen process cannot do
// that: when it runs again it answers everything waiting at once, the
// newest probe with the oldest.
type lagProxy struct {
	ln      net.Listener
	backend string
	done    chan struct{}
	wg      sync.WaitGroup

	// afterLogin: the first answer on each connection (to AUTH) is not
	// held back.
	afterLogin bool

	mu      sync.Mutex
	delay   time.Duration
	changed chan struct{}
	conns   map[net.Conn]struct{}
	// gaveUp counts the connections whose client left while an answer
	// to it was held back; answered, those that got a first answer.
	gaveUp, answered int
}

// lagPort is where a lagging pod's redis-server listens, on its address.
const lagPort = "6380"

// lag puts the pod's Redis behind a lagProxy that holds its answers back
// for delay, until the test ends or set changes it. redis-server moves to
// lagPort (announcing 6379 to its masters) and keeps its connections: its
// link to its master, its replicas'. Its clients (the operator's) are
// dropped, so they come back through the proxy, which connects from the
// client's own address.
func (c *cluster) lag(g Gomega, pod string, delay time.Duration) *lagProxy {
	return c.lagProxy(g, pod, delay, false)
}

// lagAfterLogin is lag, with the answer to a connection's login (its first
// answer) let through at once: a look on a new connection then waits one
// delay, as a probe on an open one does. (With every answer held, a new
// connection costs two delays, so no delay fails the periodic probes,
// which wait half the probe timeout, while the looks, which wait all of
// it, answer. On a loaded node that happens as the load varies.)
func (c *cluster) lagAfterLogin(g Gomega, pod string, delay time.Duration) *lagProxy {
	return c.lagProxy(g, pod, delay, true)
}

func (c *cluster) lagProxy(g Gomega, pod string, delay time.Duration, afterLogin bool) *lagProxy {
	ctx := context.Background()
	ip := c.ips[pod]
	rc := redisAt(ip, c.password)
	defer rc.Close()
	g.Expect(rc.ConfigSet(ctx, "replica-announce-port", "6379").Err()).To(Succeed(), pod)
	g.Expect(rc.ConfigSet(ctx, "port", lagPort).Err()).To(Succeed(), pod)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "6379"))
	g.Expect(err).NotTo(HaveOccurred(), pod)
	l := &lagProxy{ln: ln, backend: net.JoinHostPort(ip, lagPort), done: make(chan struct{}),
		afterLogin: afterLogin, delay: delay, changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.accept()
	c.t.Cleanup(l.close)
	direct := redisAtPort(ip, lagPort, c.password)
	defer direct.Close()
	g.Expect(direct.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err()).To(Succeed(), pod)
	return l
}

// set changes the delay, for the answers held back now too.
func (l *lagProxy) set(delay time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delay = delay
	close(l.changed)
	l.changed = make(chan struct{})
}

// counts returns how many connections' clients gave up waiting for an
// answer, and how many got one late.
func (l *lagProxy) counts() (gaveUp, answered int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gaveUp, l.answered
}

func (l *lagProxy) accept() {
	defer l.wg.Done()
	for {
		client, err := l.ln.Accept()
		if err != nil {
			return
		}
		from := client.RemoteAddr().(*net.TCPAddr)
		d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: from.IP}}
		server, err := d.Dial("tcp", l.backend)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !l.track(client, server) {
			return
		}
		left := make(chan struct{})
		l.wg.Add(2)
		go func() {
			// Requests go through at once.
			defer l.wg.Done()
			_, _ = io.Copy(server, client)
			close(left)
			_ = server.Close()
		}()
		go func() {
			defer l.wg.Done()
			defer l.untrack(client, server)
			l.answer(client, server, left)
		}()
	}
}

// answer passes the server's answers on to the client, each delay after
// it came, until either side leaves.
func (l *lagProxy) answer(client, server net.Conn, left <-chan struct{}) {
	buf := make([]byte, 64<<10)
	late, login := false, l.afterLogin
	for {
		n, err := server.Read(buf)
		if n > 0 && login {
			login = false
			if _, err := client.Write(buf[:n]); err != nil {
				return
			}
			continue
		}
		if n > 0 {
			if !l.hold(time.Now(), left) {
				l.count(&l.gaveUp)
				return
			}
			if _, err := client.Write(buf[:n]); err != nil {
				return
			}
			if !late {
				late = true
				l.count(&l.answered)
			}
		}
		if err != nil {
			return
		}
	}
}

// hold waits until delay after since; false when the client left or the
// proxy closed first.
func (l *lagProxy) hold(since time.Time, left <-chan struct{}) bool {
	for {
		l.mu.Lock()
		wait, changed := time.Until(since.Add(l.delay)), l.changed
		l.mu.Unlock()
		if wait <= 0 {
			return true
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-changed:
		case <-left:
			timer.Stop()
			return false
		case <-l.done:
			timer.Stop()
			return false
		}
		timer.Stop()
	}
}

func (l *lagProxy) count(n *int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*n++
}

// track remembers a connection's two ends for close; false when the proxy
// is closing (it closes them).
func (l *lagProxy) track(client, server net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.done:
		_, _ = client.Close(), server.Close()
		return false
	default:
	}
	l.conns[client], l.conns[server] = struct{}{}, struct{}{}
	return true
}

func (l *lagProxy) untrack(client, server net.Conn) {
	_, _ = client.Close(), server.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, client)
	delete(l.conns, server)
}

func (l *lagProxy) close() {
	l.mu.Lock()
	close(l.done)
	for c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	_ = l.ln.Close()
	l.wg.Wait()
}

// restartWithoutLastWrites kills the pod's redis-server, cuts its last
// writes (n commands) from its append-only file and starts it again as
// the chart starts every pod, a replica of nobody: a master that comes
// back with a new history and without writes its replicas acknowledged.
// It returns the bytes cut.
func (c *cluster) restartWithoutLastWrites(g Gomega, pod string, n int) int64 {
	m := c.redis[pod]
	m.kill()
	file, err := aof.NewestIncr(filepath.Join(m.dir, "appendonly"))
	g.Expect(err).NotTo(HaveOccurred())
	cut, err := aof.CutLastWrites(file, n)
	g.Expect(err).NotTo(HaveOccurred())
	m.extra = append(m.extra, "--replicaof", cachev1alpha1.StartupMasterHost, cachev1alpha1.StartupMasterPort)
	m.start(c.t)
	return cut
}

// masterOtherThan waits until another pod than from is the recorded
// master and the operation is done; it returns that pod.
func (c *cluster) masterOtherThan(g Gomega, from string) string {
	var master string
	g.Eventually(func(g Gomega) {
		cc := c.get(g)
		master = cc.Status.CurrentMaster
		g.Expect(master).NotTo(Or(BeEmpty(), Equal(from)), "status.currentMaster")
		g.Expect(cc.Status.Operation).To(BeNil(), "status.operation")
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	return master
}

// failedOverFrom is masterOtherThan, and then every pod replicates from
// the new master.
func (c *cluster) failedOverFrom(g Gomega, from string) string {
	master := c.masterOtherThan(g, from)
	g.Eventually(func(g Gomega) { c.expectReplicating(g, master, c.pods) }).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	return master
}

// kill ends the process with SIGKILL, as a crash would.
func (p *redisProc) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func redisAt(ip, password string) *redis.Client { return redisAtPort(ip, "6379", password) }

// redisAtPort is redisAt on another port (a lagging pod's server).
func redisAtPort(ip, port, password string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: net.JoinHostPort(ip, port), Password: password, DialTimeout: time.Second,
		ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1, PoolSize: 1, DisableIdentity: true})
}

// cluster is one CacheCluster with its pods, in its own namespace.
type cluster struct {
	t        *testing.T
	ns, name string
	password string
	pods     []string
	spare    []string
	ips      map[string]string
	redis    map[string]*redisProc
}

// clusterOpts shapes a test's cluster.
type clusterOpts struct {
	// subnet is the loopback /24 of the pods (127.0.<subnet>.<ordinal+1>):
	// one per test, so tests run in parallel.
	subnet int
	pods   int
	// beforeCreate runs once the pods' Redis answer, before the
	// CacheCluster exists.
	beforeCreate func(c *cluster)
	// redisArgs, when set, gives a pod's redis-server more arguments.
	redisArgs func(ordinal int) []string
	// client, when set, wraps the controller's client (a test's fault).
	client func(client.Client) client.Client
	// apiReader, when set, wraps the controller's reader of the API
	// server (a test counts its reads).
	apiReader func(client.Reader) client.Reader
	// spec, when set, changes the CacheCluster's spec before it is
	// created (a sharded layout).
	spec func(*cachev1alpha1.CacheClusterSpec)
	// objects, when set, is how many of the pods exist as Pod objects at
	// first; the others' redis-server runs, kept in spare until a test
	// adds their pods (a StatefulSet that grows).
	objects int
}

// newCluster starts the pods' redis-server processes, creates the auth
// Secret, the StatefulSet and the pods as day-one and the kubelet would
// (Running, Ready, with their addresses), starts day-two and creates the
// CacheCluster (probe timeout 1 s).
func newCluster(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	controlPlane(t)
	ctx := context.Background()
	ns := fmt.Sprintf("daytwo-%s-%d", strings.ToLower(strings.TrimPrefix(t.Name(), "TestIntegration")), time.Now().UnixNano()%100000)
	if len(ns) > 60 {
		ns = ns[len(ns)-60:]
	}
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	c := &cluster{t: t, ns: ns, name: "cache", password: randomHex(), ips: map[string]string{}, redis: map[string]*redisProc{}}
	for i := range o.pods {
		name := fmt.Sprintf("%s-%d", c.name, i)
		ip := fmt.Sprintf("127.0.%d.%d", o.subnet, i+1)
		c.pods = append(c.pods, name)
		c.ips[name] = ip
		var extra []string
		if o.redisArgs != nil {
			extra = o.redisArgs(i)
		}
		c.redis[name] = startRedis(t, ip, c.password, extra...)
	}
	if o.objects > 0 {
		c.pods, c.spare = c.pods[:o.objects], c.pods[o.objects:]
	}
	if o.beforeCreate != nil {
		o.beforeCreate(c)
	}

	labels := map[string]string{cachev1alpha1.LabelCluster: c.name, cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.name + "-auth", Labels: labels},
		Data:       map[string][]byte{"password": []byte(c.password)},
	}
	must(t, k8s.Create(ctx, secret))
	c.createStatefulSet(int32(len(c.pods)))
	for _, name := range c.pods {
		c.createPod(name)
	}
	startDayTwo(t, ns, o)
	cc := &cachev1alpha1.CacheCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.name},
		Spec: cachev1alpha1.CacheClusterSpec{
			Version: "7.0.15", Replicas: ptr.To(int32(o.pods)),
			HighAvailability: cachev1alpha1.HighAvailabilitySpec{ProbeTimeoutSeconds: 1},
		},
	}
	if o.spec != nil {
		o.spec(&cc.Spec)
	}
	must(t, k8s.Create(ctx, cc))
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func randomHex() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

const revision = "cache-rev1"

// createStatefulSet stands for day-one's StatefulSet, settled (observed
// generation, an update revision): operations wait for it.
func (c *cluster) createStatefulSet(replicas int32) {
	ctx := context.Background()
	labels := map[string]string{cachev1alpha1.LabelCluster: c.name, cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name, Labels: labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas), ServiceName: c.name + "-headless",
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{cachev1alpha1.LabelCluster: c.name}},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "redis", Image: "redis:7.0.15"}}},
			},
		},
	}
	must(c.t, k8s.Create(ctx, sts))
	c.settleStatefulSet()
}

// settleStatefulSet writes the status the StatefulSet controller would.
func (c *cluster) settleStatefulSet() {
	ctx := context.Background()
	sts := &appsv1.StatefulSet{}
	must(c.t, k8s.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: c.name}, sts))
	sts.Status = appsv1.StatefulSetStatus{
		ObservedGeneration: sts.Generation, Replicas: *sts.Spec.Replicas, ReadyReplicas: *sts.Spec.Replicas,
		CurrentRevision: revision, UpdateRevision: revision,
	}
	must(c.t, k8s.Status().Update(ctx, sts))
}

// createPod creates a pod and reports it Running and Ready at its address.
func (c *cluster) createPod(name string) {
	must(c.t, c.createPodAt(name, revision))
}

// createPodAt is createPod for a pod of the StatefulSet revision rev; it
// returns what went wrong, so a goroutine other than the test's can call
// it.
func (c *cluster) createPodAt(name, rev string) error {
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name, Labels: map[string]string{
			cachev1alpha1.LabelCluster: c.name, cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue,
			appsv1.ControllerRevisionHashLabelKey: rev, appsv1.StatefulSetPodNameLabel: name,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "redis", Image: "redis:7.0.15"}}},
	}
	if err := k8s.Create(ctx, p); err != nil {
		return err
	}
	now := metav1.Now()
	ip := c.ips[name]
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	return k8s.Status().Update(ctx, p)
}

func (c *cluster) get(g Gomega) *cachev1alpha1.CacheCluster {
	cc := &cachev1alpha1.CacheCluster{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: c.name}, cc)).To(Succeed())
	return cc
}

// roleLabels maps every pod of the cluster to its role label.
func (c *cluster) roleLabels(g Gomega) map[string]string {
	pods := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), pods, client.InNamespace(c.ns), client.MatchingLabels{cachev1alpha1.LabelCluster: c.name})).To(Succeed())
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = p.Labels[cachev1alpha1.LabelRole]
	}
	return out
}

// info is INFO replication of a pod's Redis, as fields.
func (c *cluster) info(g Gomega, pod string) map[string]string {
	rc := redisAt(c.ips[pod], c.password)
	defer rc.Close()
	s, err := rc.Info(context.Background(), "replication").Result()
	g.Expect(err).NotTo(HaveOccurred(), pod)
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			out[k] = v
		}
	}
	return out
}

// expectReplicating checks one master everywhere: recorded in the status
// with no operation running, labelled master, master in Redis with every
// other pod of pods attached; every other pod a labelled replica that
// follows it with its link up.
func (c *cluster) expectReplicating(g Gomega, master string, pods []string) {
	cc := c.get(g)
	g.Expect(cc.Status.CurrentMaster).To(Equal(master), "status.currentMaster")
	g.Expect(cc.Status.Operation).To(BeNil(), "status.operation")
	labels := c.roleLabels(g)
	m := c.info(g, master)
	g.Expect(m["role"]).To(Equal("master"), master)
	g.Expect(m["connected_slaves"]).To(Equal(fmt.Sprint(len(pods)-1)), master)
	g.Expect(labels[master]).To(Equal(cachev1alpha1.RoleMaster), master)
	for _, p := range pods {
		if p == master {
			continue
		}
		r := c.info(g, p)
		g.Expect(r["role"]).To(Equal("slave"), p)
		g.Expect(r["master_host"]).To(Equal(c.ips[master]), p)
		g.Expect(r["master_link_status"]).To(Equal("up"), p)
		g.Expect(labels[p]).To(Equal(cachev1alpha1.RoleReplica), p)
	}
}

// waitReplicating waits until expectReplicating holds for some master and
// returns it.
func (c *cluster) waitReplicating(g Gomega) string {
	var master string
	g.Eventually(func(g Gomega) {
		master = c.get(g).Status.CurrentMaster
		g.Expect(master).NotTo(BeEmpty(), "status.currentMaster")
		c.expectReplicating(g, master, c.pods)
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	return master
}

// events are the reasons of the Events about the CacheCluster, with
// their notes.
func (c *cluster) events(g Gomega) map[string][]string {
	list := &corev1.EventList{}
	g.Expect(k8s.List(context.Background(), list, client.InNamespace(c.ns))).To(Succeed())
	out := map[string][]string{}
	for _, e := range list.Items {
		// events.k8s.io Events read through core/v1: regarding is
		// involvedObject, note is message.
		if e.InvolvedObject.Kind == "CacheCluster" {
			out[e.Reason] = append(out[e.Reason], e.Message)
		}
	}
	return out
}

// writer writes numbered keys to the pod labelled master (where the
// client Service sends traffic) and counts a write as acknowledged only
// when WAIT 1 says a replica has it.
type writer struct {
	c *cluster

	mu       sync.Mutex
	acked    map[string]string
	attempts int
	stop     chan struct{}
	done     chan struct{}
}

const waitMs = 200

func (c *cluster) startWriter() *writer {
	w := &writer{c: c, acked: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	c.t.Cleanup(w.Stop)
	return w
}

// labelledMaster is the address of the only pod labelled master.
func (w *writer) labelledMaster(ctx context.Context) (string, error) {
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(w.c.ns), client.MatchingLabels{cachev1alpha1.LabelRole: cachev1alpha1.RoleMaster}); err != nil {
		return "", err
	}
	if len(pods.Items) != 1 {
		return "", fmt.Errorf("%d pods labelled master", len(pods.Items))
	}
	return pods.Items[0].Status.PodIP, nil
}

func (w *writer) run() {
	defer close(w.done)
	ctx := context.Background()
	var rc *redis.Client
	var addr string
	var resolved time.Time
	defer func() {
		if rc != nil {
			_ = rc.Close()
		}
	}()
	for i := 0; ; i++ {
		select {
		case <-w.stop:
			return
		default:
		}
		if rc == nil || time.Since(resolved) > 100*time.Millisecond {
			ip, err := w.labelledMaster(ctx)
			if err != nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			resolved = time.Now()
			if ip != addr && rc != nil {
				_ = rc.Close()
				rc = nil
			}
			addr = ip
		}
		if rc == nil {
			rc = redis.NewClient(&redis.Options{Addr: addr + ":6379", Password: w.c.password, DialTimeout: 200 * time.Millisecond,
				ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1, PoolSize: 1, DisableIdentity: true})
		}
		key, val := fmt.Sprintf("w:%06d", i), fmt.Sprintf("v%d-%d", i, time.Now().UnixNano())
		w.mu.Lock()
		w.attempts++
		w.mu.Unlock()
		opCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := rc.Set(opCtx, key, val, 0).Err()
		var replicas int64
		if err == nil {
			replicas, err = rc.Do(opCtx, "WAIT", 1, waitMs).Int64()
		}
		cancel()
		if err == nil && replicas >= 1 {
			w.mu.Lock()
			w.acked[key] = val
			w.mu.Unlock()
			continue
		}
		if err != nil {
			_ = rc.Close()
			rc = nil
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// Stop ends the writes; it may be called more than once.
func (w *writer) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *writer) ackedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// waitAcked waits until n more writes are acknowledged.
func (w *writer) waitAcked(g Gomega, n int) {
	from := w.ackedCount()
	g.Eventually(w.ackedCount).WithTimeout(deadline).WithPolling(poll).Should(BeNumerically(">=", from+n), "acknowledged writes")
}

// lostOn stops the writer and reads every acknowledged key back from a
// pod's Redis; it returns the keys missing or changed there.
func (w *writer) lostOn(g Gomega, pod string) (checked int, lost []string) {
	w.Stop()
	rc := redisAt(w.c.ips[pod], w.c.password)
	defer rc.Close()
	ctx := context.Background()
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]string, 0, len(w.acked))
	for k := range w.acked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pipe := rc.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		gets[i] = pipe.Get(ctx, k)
	}
	_, _ = pipe.Exec(ctx)
	for i, k := range keys {
		if got, err := gets[i].Result(); err != nil || got != w.acked[k] {
			lost = append(lost, k)
		}
	}
	return len(keys), lost
}

// masterLabels watches the pods' role labels and remembers the most pods
// ever labelled master at once.
type masterLabels struct {
	mu  sync.Mutex
	max int
}

func (c *cluster) watchMasterLabels() *masterLabels {
	m := &masterLabels{}
	labels := map[string]string{}
	c.watch(&corev1.PodList{}, func(typ watch.EventType, o client.Object) {
		if typ == watch.Deleted {
			delete(labels, o.GetName())
		} else {
			labels[o.GetName()] = o.GetLabels()[cachev1alpha1.LabelRole]
		}
		n := 0
		for _, l := range labels {
			if l == cachev1alpha1.RoleMaster {
				n++
			}
		}
		m.mu.Lock()
		m.max = max(m.max, n)
		m.mu.Unlock()
	})
	return m
}

func (m *masterLabels) Max() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.max
}

// watch calls f, in order and from one goroutine, for every change of the
// objects of list's kind in the cluster's namespace, until the test ends.
func (c *cluster) watch(list client.ObjectList, f func(watch.EventType, client.Object)) {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := k8s.Watch(ctx, list, client.InNamespace(c.ns))
	if err != nil {
		cancel()
		c.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if o, ok := ev.Object.(client.Object); ok && ev.Type != watch.Error && ev.Type != watch.Bookmark {
				f(ev.Type, o)
			}
		}
	}()
	c.t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
}

func metaOf(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}
