//go:build e2e

package benchmarks

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/test/cluster"
)

func init() {
	// go-redis logs every failed dial; during a failover that is noise.
	redis.SetLogger(quiet{})
	// client-go's informers log to stderr through klog; interleaved with
	// the benchmark's result lines they break their parsing.
	klog.SetLogger(logr.Discard())
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// detection is the failure-detection timeout both sides get: cacheops'
// probeTimeoutSeconds and Sentinel's down-after-milliseconds.
const detection = time.Second

// BenchmarkFailover measures the time from killing the master (SIGKILL) to
// the first write acknowledged by a replica (SET, then WAIT 1) — what an
// application sees. "baseline" is Redis Sentinel (three sentinels, quorum
// 2, down-after-milliseconds 1000, a go-redis client that follows
// Sentinel); "cacheops" is the operator on the process-backed cluster with
// probeTimeoutSeconds 1, writing through the client Service's endpoint;
// "cacheops-tls" the same with spec.tls.
// Each iteration is one failover; run with -benchtime 10x.
func BenchmarkFailover(b *testing.B) {
	b.Run("baseline", func(b *testing.B) {
		b.StopTimer()
		var runs []time.Duration
		for i := 0; i < b.N; i++ {
			runs = append(runs, sentinelFailover(b))
		}
		report(b, runs)
	})
	b.Run("cacheops", func(b *testing.B) {
		// Only kill → acknowledged write is timed, not the cluster's start.
		b.StopTimer()
		root := repoRoot()
		bin := filepath.Join(root, "bin")
		c, k8s, stop := startOperatorCluster(b, root, bin)
		defer stop()
		var runs []time.Duration
		for i := 0; i < b.N; i++ {
			runs = append(runs, cacheopsFailover(b, c, k8s, i))
		}
		report(b, runs)
	})
	// The same with spec.tls: the operator's probes and commands, the
	// replicas' links and the client all speak TLS. Beside "cacheops" in
	// the same run, it is the cost of TLS on a failover.
	b.Run("cacheops-tls", func(b *testing.B) {
		b.StopTimer()
		root := repoRoot()
		c, k8s, stop := startOperatorCluster(b, root, filepath.Join(root, "bin"))
		defer stop()
		var runs []time.Duration
		for i := 0; i < b.N; i++ {
			runs = append(runs, cacheopsFailoverWith(b, c, k8s, i, true))
		}
		report(b, runs)
	})
	// A sharded cluster's shard master killed (sharded_failover_bench_test.go):
	// Redis Cluster's own election with one replica per shard (WAIT 1
	// waits for the killed pod to come back as a replica) and with two;
	// and, with two, a failover driven by an operator with CLUSTER
	// FAILOVER FORCE, played by the benchmark.
	for _, v := range []struct {
		name string
		sc   shardedCase
	}{
		{"cacheops-sharded", shardedCase{replicas: 1}},
		{"cacheops-sharded-2r", shardedCase{replicas: 2}},
		{"cacheops-sharded-2r-forced", shardedCase{replicas: 2, forced: true}},
	} {
		b.Run(v.name, func(b *testing.B) {
			b.StopTimer()
			root := repoRoot()
			c, k8s, stop := startOperatorCluster(b, root, filepath.Join(root, "bin"))
			defer stop()
			var runs []shardedResult
			for i := 0; i < b.N; i++ {
				runs = append(runs, shardedFailover(b, c, k8s, i, v.sc))
			}
			reportSharded(b, runs)
		})
	}
}

func report(b *testing.B, runs []time.Duration) {
	p50, worst := quantiles(runs)
	b.ReportMetric(p50.Seconds(), "p50_s")
	b.ReportMetric(worst.Seconds(), "max_s")
	b.ReportMetric(float64(len(runs)), "failovers")
}

// quantiles returns the median and the maximum.
func quantiles(d []time.Duration) (p50, worst time.Duration) {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], s[len(s)-1]
}

// writer is what ackedWrite needs of a client.
type writer interface {
	Set(ctx context.Context, key string, value any, exp time.Duration) *redis.StatusCmd
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// ackedWrite tries writes until one is acknowledged by a replica and
// returns when.
func ackedWrite(ctx context.Context, c writer, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	var last error
	for i := 0; time.Now().Before(deadline); i++ {
		if last = writeAcked(ctx, c, i); last == nil {
			return time.Now(), nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("no acknowledged write within %s (last attempt: %v)", limit, last)
}

// tryWrite writes once and tells whether a replica acknowledged it (SET,
// then WAIT 1).
func tryWrite(ctx context.Context, c writer, i int) bool { return writeAcked(ctx, c, i) == nil }

// writeAcked writes once and says why a replica did not acknowledge it.
func writeAcked(ctx context.Context, c writer, i int) error {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := c.Set(ctx, "bench:"+strconv.Itoa(i), i, 0).Err(); err != nil {
		return fmt.Errorf("SET: %w", err)
	}
	n, err := c.Do(ctx, "WAIT", 1, 200).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("WAIT: %w", err)
	case n < 1:
		return fmt.Errorf("WAIT: no replica acknowledged within 200 ms")
	}
	return nil
}

func freePort(b *testing.B) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startProcess(b *testing.B, dir, name string, args ...string) *exec.Cmd {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("redis-server", args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() })
	return cmd
}

func sentinelFailover(b *testing.B) time.Duration {
	ctx := context.Background()
	dir := b.TempDir()
	ports := []int{freePort(b), freePort(b), freePort(b)}
	var servers []*exec.Cmd
	for i, p := range ports {
		d := filepath.Join(dir, fmt.Sprintf("redis-%d", i))
		_ = os.MkdirAll(d, 0o755)
		args := []string{"--port", strconv.Itoa(p), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes", "--dir", d}
		if i > 0 {
			args = append(args, "--replicaof", "127.0.0.1", strconv.Itoa(ports[0]))
		}
		servers = append(servers, startProcess(b, d, "redis", args...))
	}
	var sentinels []string
	for i := 0; i < 3; i++ {
		p := freePort(b)
		conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", i))
		content := fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel monitor m 127.0.0.1 %d 2\nsentinel down-after-milliseconds m %d\nsentinel failover-timeout m 10000\nsentinel parallel-syncs m 2\n",
			p, ports[0], detection.Milliseconds())
		if err := os.WriteFile(conf, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
		startProcess(b, dir, fmt.Sprintf("sentinel-%d", i), conf, "--sentinel")
		sentinels = append(sentinels, fmt.Sprintf("127.0.0.1:%d", p))
	}
	// Wait until every sentinel knows both replicas and the other sentinels.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready := true
		for _, s := range sentinels {
			sc := redis.NewSentinelClient(&redis.Options{Addr: s})
			m, err := sc.Master(ctx, "m").Result()
			_ = sc.Close()
			if err != nil || m["num-slaves"] != "2" || m["num-other-sentinels"] != "2" {
				ready = false
			}
		}
		if ready {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("sentinels did not discover the topology")
		}
		time.Sleep(100 * time.Millisecond)
	}
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: sentinels,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, MaxRetries: -1})
	defer fc.Close()
	if _, err := ackedWrite(ctx, fc, 10*time.Second); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	start := time.Now()
	_ = servers[0].Process.Kill()
	at, err := ackedWrite(ctx, fc, 60*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	return at.Sub(start)
}

func startOperatorCluster(b *testing.B, root, bin string) (*cluster.Cluster, client.Client, func()) {
	manager := filepath.Join(bin, "manager")
	build := exec.Command("go", "build", "-o", manager, "./cmd/manager")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building manager: %v\n%s", err, out)
	}
	c, err := cluster.Start(context.Background(), cluster.Options{
		Dir: b.TempDir(), BinDir: bin,
		CRDDirectories: []string{filepath.Join(root, "charts", "cacheops", "crds")},
		Nodes:          []cluster.NodeOptions{{Name: "node-a", Zone: "zone-a"}, {Name: "node-b", Zone: "zone-b"}, {Name: "node-c", Zone: "zone-c"}},
		Bridge:         "cacheopsbench",
		PodCIDR:        "10.246.0.0/16",
		// The operator's image: an upgrade's pre-check pod copies the data
		// with `manager precheck-seed`.
		Images: append(cluster.DefaultImages(), cluster.OperatorImage(manager)),
	})
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(manager, "--metrics-bind-address=0", "--health-probe-bind-address=0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.Stop()
		b.Fatal(err)
	}
	scheme := kruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = cachev1alpha1.AddToScheme(scheme)
	cfg := c.Config()
	cfg.QPS, cfg.Burst = 200, 400
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	return c, k8s, func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		c.Stop()
	}
}

func cacheopsFailover(b *testing.B, c *cluster.Cluster, k8s client.Client, i int) time.Duration {
	return cacheopsFailoverWith(b, c, k8s, i, false)
}

// cacheopsFailoverWith is one failover of a new three-pod cluster, with
// spec.tls when withTLS (the client then trusts ConfigMap fo-ca).
func cacheopsFailoverWith(b *testing.B, c *cluster.Cluster, k8s client.Client, i int, withTLS bool) time.Duration {
	b.StopTimer()
	ctx := context.Background()
	ns := fmt.Sprintf("bench-failover-%d", i)
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	three := int32(3)
	cc := &cachev1alpha1.CacheCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "fo", Namespace: ns},
		Spec: cachev1alpha1.CacheClusterSpec{Version: "7.0.15", Replicas: &three,
			HighAvailability: cachev1alpha1.HighAvailabilitySpec{ProbeTimeoutSeconds: int32(detection.Seconds())}},
	}
	cc.Spec.TLS.Enabled = withTLS
	if err := k8s.Create(ctx, cc); err != nil {
		b.Fatal(err)
	}
	// One master with two linked replicas.
	master := waitReplicas(b, k8s, cc, 3)
	secret := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fo-auth"}, secret); err != nil {
		b.Fatal(err)
	}
	sc := &serviceClient{k8s: k8s, ns: ns, service: "fo", password: string(secret.Data["password"])}
	if withTLS {
		bundle := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fo-ca"}, bundle); err != nil {
			b.Fatal(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(bundle.Data["ca.crt"])) {
			b.Fatal("ConfigMap fo-ca holds no CA")
		}
		sc.tls = &tls.Config{RootCAs: pool, ServerName: "fo." + ns + ".svc", MinVersion: tls.VersionTLS12}
	}
	defer sc.Close()
	if _, err := ackedWrite(ctx, sc, 30*time.Second); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	start := time.Now()
	if err := c.KillContainer(ns, master, "redis"); err != nil {
		b.Fatal(err)
	}
	at, err := ackedWrite(ctx, sc, 60*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	_ = k8s.Delete(ctx, cc)
	return at.Sub(start)
}

// serviceClient is a client behind the Service: it sends commands to the
// ready endpoint of the client Service and looks it up again after an error.
type serviceClient struct {
	*redis.Client
	k8s          client.Client
	ns, service  string
	password     string
	addr         string
	lastResolved time.Time
	// tls, when set, is the client side of TLS (spec.tls).
	tls *tls.Config
}

func (s *serviceClient) resolve(ctx context.Context) error {
	// Its own deadline, not the write's 500 ms: on a loaded API server a
	// list takes longer than that, and a write that never reaches Redis
	// measures the API server, not the failover.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	slices := &discoveryv1.EndpointSliceList{}
	if err := s.k8s.List(ctx, slices, client.InNamespace(s.ns), client.MatchingLabels{discoveryv1.LabelServiceName: s.service}); err != nil {
		return err
	}
	for _, sl := range slices.Items {
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready && len(e.Addresses) > 0 {
				if e.Addresses[0] != s.addr || s.Client == nil {
					if s.Client != nil {
						_ = s.Client.Close()
					}
					s.addr = e.Addresses[0]
					s.Client = redis.NewClient(&redis.Options{Addr: s.addr + ":6379", Password: s.password, TLSConfig: s.tls, DialTimeout: 200 * time.Millisecond,
						ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, MaxRetries: -1, PoolSize: 1})
				}
				return nil
			}
		}
	}
	return fmt.Errorf("no ready endpoint")
}

func (s *serviceClient) Set(ctx context.Context, key string, value any, exp time.Duration) *redis.StatusCmd {
	if s.Client == nil || time.Since(s.lastResolved) > 100*time.Millisecond {
		if err := s.resolve(ctx); err != nil {
			cmd := redis.NewStatusCmd(ctx)
			cmd.SetErr(err)
			return cmd
		}
		s.lastResolved = time.Now()
	}
	return s.Client.Set(ctx, key, value, exp)
}

func (s *serviceClient) Close() error {
	if s.Client != nil {
		return s.Client.Close()
	}
	return nil
}
