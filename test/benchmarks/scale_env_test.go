//go:build e2e

package benchmarks

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/test/cluster"
)

// scaleEnv is the process-backed cluster and one manager process whose
// metrics and pprof endpoints the benchmark reads.
type scaleEnv struct {
	c                    *cluster.Cluster
	dir                  string
	k8s                  client.WithWatch
	manager              string
	metricsAddr, pprofAd string
	cmd                  *exec.Cmd
	managerLog           *os.File
	// args are the manager's extra flags.
	args []string
	// stopOnce: the benchmark's end and an interruption (guard) both
	// stop the environment, once.
	stopOnce sync.Once
	// memLimit is the manager's GOMEMLIMIT.
	memLimit string
	stopped  chan struct{}
}

// started is about when the test binary started: go test's -timeout
// counts from there.
var started = time.Now()

// startScaleEnv starts a cluster whose three nodes hold n clusters' pods
// and more (or only the control plane: no node, pods are never scheduled),
// and the manager.
func startScaleEnv(b *testing.B, n int, controlPlaneOnly bool) *scaleEnv {
	root := repoRoot()
	bin := filepath.Join(root, "bin")
	e := &scaleEnv{manager: filepath.Join(bin, "manager"), stopped: make(chan struct{})}
	build := exec.Command("go", "build", "-o", e.manager, "./cmd/manager")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building manager: %v\n%s", err, out)
	}
	// Every pod fits on any node: three per cluster, and room to restart.
	maxPods := 3*(n+1) + 30
	var nodes []cluster.NodeOptions
	for _, z := range []string{"a", "b", "c"} {
		nodes = append(nodes, cluster.NodeOptions{Name: "node-" + z, Zone: "zone-" + z, MaxPods: maxPods})
	}
	dir, err := os.MkdirTemp("", "cacheops-bench-scale-")
	if err != nil {
		b.Fatal(err)
	}
	c, err := cluster.Start(context.Background(), cluster.Options{
		Dir: dir, BinDir: bin,
		CRDDirectories:   []string{filepath.Join(root, "charts", "cacheops", "crds")},
		Nodes:            nodes,
		Bridge:           "cacheopsscale",
		PodCIDR:          "10.248.0.0/16", // its own: not the Argo CD suite's 10.247/16, whose routes a bridge left by a killed run would take
		ControlPlaneOnly: controlPlaneOnly,
		// Kubernetes' default, not the tests' 10 s: with 900 pods on two
		// cores a lease renewal is late now and then, and at 10 s the
		// nodes turned NotReady and their pods were evicted (268
		// TaintManagerEviction events in the first 15 minutes of a run).
		NodeMonitorGracePeriod: 50 * time.Second,
		// SCALE_KCM_QPS=20 measures with Kubernetes' default request
		// limit (run 18's left column).
		ControllerManagerQPS: envInt("SCALE_KCM_QPS", 0),
	})
	if err != nil {
		b.Fatal(err)
	}
	e.c, e.dir = c, dir
	logf(b, "cluster state and logs in %s (removed when the benchmark passes, unless SCALE_KEEP is set)", dir)
	e.metricsAddr = fmt.Sprintf("127.0.0.1:%d", freePort(b))
	e.pprofAd = fmt.Sprintf("127.0.0.1:%d", freePort(b))
	if e.managerLog, err = os.Create(filepath.Join(dir, "manager.log")); err != nil {
		b.Fatal(err)
	}
	if controlPlaneOnly {
		// No pod ever runs: every cluster ends Failed (more than half of
		// its pods down for --majority-down-after, default 2 minutes).
		// Reached within seconds here, the steady state is measured
		// after that last status write, not among 1,000 of them.
		e.args = append(e.args, "--majority-down-after=10s")
	}
	// Extra flags, to try worker counts or a log level without editing
	// the benchmark.
	e.args = append(e.args, strings.Fields(os.Getenv("SCALE_MANAGER_ARGS"))...)
	// The manager runs with the install chart's Go memory limit, as it
	// does in a cluster; SCALE_MANAGER_GOMEMLIMIT overrides it ("off":
	// Go's default, no soft limit).
	e.memLimit = chartGoMemLimit(b, root)
	if v := os.Getenv("SCALE_MANAGER_GOMEMLIMIT"); v != "" {
		e.memLimit = v
	}
	if e.memLimit == "" {
		e.memLimit = "off"
	}
	logf(b, "manager's GOMEMLIMIT: %s", e.memLimit)
	e.guard(b)
	e.startManager(b)
	scheme := kruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = cachev1alpha1.AddToScheme(scheme)
	cfg := c.Config()
	cfg.QPS, cfg.Burst = 200, 400
	if e.k8s, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme}); err != nil {
		b.Fatal(err)
	}
	return e
}

// managerNice is the niceness the manager runs at (SCALE_MANAGER_NICE,
// default 0). Here the manager shares 2 cores with every pod's
// redis-server and the nodes; at a load of 60 its (at most 2) running
// threads get 2 runnable tasks' share, and an answer that reached its
// socket in time fails the probe when the manager runs again only after
// the deadline. In a cluster it runs on a node of its own
// or with a CPU request, which the kernel's CPU shares honour; a negative
// niceness stands for that (-10: about 9 times a nice-0 task's weight).
// At -10 (docs/scale.md, run 27) the fleet's failovers were slower, not
// faster: the pods, with less CPU, answered later.
var managerNice = envInt("SCALE_MANAGER_NICE", 0)

func (e *scaleEnv) startManager(b *testing.B) {
	args := append([]string{"--metrics-bind-address=" + e.metricsAddr, "--health-probe-bind-address=0", "--pprof-bind-address=" + e.pprofAd}, e.args...)
	cmd := exec.Command(e.manager, args...)
	if managerNice != 0 {
		// nice sets the niceness and execs the manager: every thread
		// the Go runtime starts inherits it, and the PID is the
		// manager's.
		cmd = exec.Command("nice", append([]string{"-n", strconv.Itoa(managerNice), e.manager}, args...)...)
		logf(b, "the manager runs at niceness %d", managerNice)
	}
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.c.Kubeconfig(), "GOMEMLIMIT="+e.memLimit)
	cmd.Stdout, cmd.Stderr = e.managerLog, e.managerLog
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	e.cmd = cmd
}

func (e *scaleEnv) stopManager() {
	if e.cmd == nil {
		return
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = e.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = e.cmd.Process.Kill()
		<-done
	}
	e.cmd = nil
}

// stop leaves nothing running: the manager, then every pod, the pod
// network (namespaces, bridge) and the control plane. Their logs and
// state are removed when the benchmark passed, unless SCALE_KEEP is set
// (the control plane's and nodes' logs show, for one, whether
// kube-controller-manager was throttled).
func (e *scaleEnv) stop(b *testing.B) {
	e.stopAll(!b.Failed() && os.Getenv("SCALE_KEEP") == "")
}

func (e *scaleEnv) stopAll(removeDir bool) {
	e.stopOnce.Do(func() {
		defer close(e.stopped)
		e.stopManager()
		e.c.Stop()
		if e.managerLog == nil {
			return
		}
		_ = e.managerLog.Close()
		// The manager's log stays beside the figures: where a failover's time
		// went is read from its steps' timestamps.
		if log, err := os.ReadFile(e.managerLog.Name()); err == nil && os.MkdirAll(benchDir(), 0o755) == nil {
			_ = os.WriteFile(filepath.Join(benchDir(), "scale-"+filepath.Base(e.dir)+"-manager.log"), log, 0o644)
		}
		if removeDir {
			_ = os.RemoveAll(e.dir)
		}
	})
}

// guard stops the environment when the benchmark is interrupted (SIGINT,
// SIGTERM, SIGHUP) or is about to reach go test's -timeout, whose panic
// skips every deferred stop. The processes would die with the test binary
// (their parent-death signal), but the pods' network namespaces and the
// bridge would stay, and a kube-apiserver stopped by hand once outlived
// its benchmark. The environment is stopped, then the binary exits.
func (e *scaleEnv) guard(b *testing.B) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	var deadline <-chan time.Time
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 0 {
			// Stopping 900 pods and the control plane takes about a
			// minute at most.
			deadline = time.After(time.Until(started.Add(d - 2*time.Minute)))
		}
	}
	go func() {
		defer signal.Stop(sig)
		why := ""
		select {
		case s := <-sig:
			why = "signal " + s.String()
		case <-deadline:
			why = "go test's -timeout is two minutes away"
		case <-e.stopped:
			return
		}
		fmt.Fprintf(os.Stderr, "BenchmarkScale: %s: stopping the manager, the pods, the pod network and the control plane (state kept in %s)\n", why, e.dir)
		e.stopAll(false)
		os.Exit(2)
	}()
}

// procStatus reads one field (in kB) of the manager's /proc/PID/status.
func (e *scaleEnv) procStatus(field string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, field+":") {
			if f := strings.Fields(line); len(f) > 1 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb
			}
		}
	}
	return 0
}

func (e *scaleEnv) rss() float64     { return e.procStatus("VmRSS") / 1024 }
func (e *scaleEnv) peakRSS() float64 { return e.procStatus("VmHWM") / 1024 }

// cpuSeconds is the manager's user and system time so far.
func (e *scaleEnv) cpuSeconds() float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", e.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses: state
	// is field 3, utime 14 and stime 15, in clock ticks (USER_HZ, 100).
	rest := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	ut, _ := strconv.ParseFloat(rest[11], 64)
	st, _ := strconv.ParseFloat(rest[12], 64)
	return (ut + st) / 100
}

// scrape reads the manager's metrics endpoint: every series by its name
// and labels as written.
func (e *scaleEnv) scrape(b *testing.B) map[string]float64 {
	m, err := e.tryScrape()
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func (e *scaleEnv) tryScrape() (map[string]float64, error) {
	resp, err := http.Get("http://" + e.metricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parseMetrics(resp.Body)
}

// parseMetrics reads Prometheus' text format: every series by its name
// and labels as written.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// sumSeries adds the series of one metric whose labels contain every
// one of the given texts.
func sumSeries(m map[string]float64, name string, labels ...string) float64 {
	total := 0.0
	for k, v := range m {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(k, l)
		}
		if match {
			total += v
		}
	}
	return total
}

// seriesDelta lists, most first, how much each series of name grew
// between two scrapes, by its labels.
func seriesDelta(before, after map[string]float64, name string) string {
	type grown struct {
		labels string
		by     float64
	}
	var all []grown
	for k, v := range after {
		if labels, ok := strings.CutPrefix(k, name); ok && (labels == "" || labels[0] == '{') && v > before[k] {
			all = append(all, grown{labels, v - before[k]})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		return all[i].by > all[j].by || all[i].by == all[j].by && all[i].labels < all[j].labels
	})
	parts := make([]string, len(all))
	for i, g := range all {
		parts[i] = fmt.Sprintf("%s %.0f", g.labels, g.by)
	}
	return strings.Join(parts, ", ")
}

// requestDelta counts the manager's API requests between two scrapes:
// GET (gets, lists) are reads, every other verb a write. Watches are long
// requests counted when they start.
func requestDelta(before, after map[string]float64) (reads, writes float64) {
	for k, v := range after {
		if !strings.HasPrefix(k, "rest_client_requests_total{") {
			continue
		}
		d := v - before[k]
		if strings.Contains(k, `method="GET"`) {
			reads += d
		} else {
			writes += d
		}
	}
	return reads, writes
}

// profile saves a CPU profile (20 s) and a heap profile of the manager
// into bench/, with their top items beside them.
func (e *scaleEnv) profile(b *testing.B, name string) {
	if err := os.MkdirAll(benchDir(), 0o755); err != nil {
		b.Fatal(err)
	}
	for _, p := range []struct{ kind, path string }{{"cpu", "profile?seconds=20"}, {"heap", "heap"}} {
		file := filepath.Join(benchDir(), fmt.Sprintf("scale-%s-%s.pprof", name, p.kind))
		resp, err := http.Get("http://" + e.pprofAd + "/debug/pprof/" + p.path)
		if err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(file)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(f, resp.Body)
		resp.Body.Close()
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		args := []string{"tool", "pprof", "-top", "-nodecount=25"}
		if p.kind == "heap" {
			args = append(args, "-sample_index=inuse_space")
		}
		top, err := exec.Command("go", append(args, file)...).CombinedOutput()
		if err != nil {
			logf(b, "go tool pprof %s: %v", file, err)
		}
		if p.kind == "heap" {
			// Where the RSS goes beyond the live heap: the runtime's own
			// account (heap in use, idle, released to the system, stacks).
			stats := e.memStats(b)
			top = append(top, "\nruntime.MemStats (MiB):\n"...)
			for _, k := range []string{"HeapAlloc", "HeapInuse", "HeapIdle", "HeapReleased", "HeapSys", "StackSys", "Sys", "NextGC"} {
				top = fmt.Appendf(top, "  %-12s %7.1f\n", k, stats[k]/(1<<20))
			}
			b.ReportMetric(stats["HeapInuse"]/(1<<20), "heap_inuse_MiB")
		}
		if err := os.WriteFile(strings.TrimSuffix(file, ".pprof")+"-top.txt", top, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// memStats reads the manager's runtime.MemStats, as the text heap profile
// ends with them ("# HeapInuse = 123").
func (e *scaleEnv) memStats(b *testing.B) map[string]float64 {
	resp, err := http.Get("http://" + e.pprofAd + "/debug/pprof/heap?debug=1")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var k string
		var v float64
		if n, _ := fmt.Sscanf(sc.Text(), "# %s = %g", &k, &v); n == 2 {
			out[k] = v
		}
	}
	return out
}

// loadAverage is the machine's one-minute load average.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

type resourceWrites struct {
	verb, resource string
	count          float64
}

// writesByResource counts the manager's writes between two scrapes by
// verb and resource (its cacheops_api_requests_total), most first.
func writesByResource(before, after map[string]float64) []resourceWrites {
	return requestsByResource(before, after, false)
}

// requestsByResource counts the manager's reads (get, list, watch) or
// writes (every other verb) between two scrapes by verb and resource,
// most first.
func requestsByResource(before, after map[string]float64, reads bool) []resourceWrites {
	var out []resourceWrites
	for k, v := range after {
		if !strings.HasPrefix(k, "cacheops_api_requests_total{") {
			continue
		}
		verb, resource := label(k, "verb"), label(k, "resource")
		read := verb == "get" || verb == "list" || verb == "watch"
		if d := v - before[k]; d > 0 && read == reads {
			out = append(out, resourceWrites{verb: verb, resource: resource, count: d})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].count > out[j].count })
	return out
}

// label reads one label's value from a series written as
// name{a="x",b="y"}.
func label(series, name string) string {
	i := strings.Index(series, name+`="`)
	if i < 0 {
		return ""
	}
	rest := series[i+len(name)+2:]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return ""
}

// chartGoMemLimit is the install chart's default manager.goMemLimit.
func chartGoMemLimit(b *testing.B, root string) string {
	raw, err := os.ReadFile(filepath.Join(root, "charts", "cacheops", "values.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	var v struct {
		Manager struct {
			GoMemLimit string `json:"goMemLimit"`
		} `json:"manager"`
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		b.Fatalf("charts/cacheops/values.yaml: %v", err)
	}
	return v.Manager.GoMemLimit
}
