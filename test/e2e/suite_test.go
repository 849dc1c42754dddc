//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/test/cluster"
	"github.com/cacheops/cacheops/test/s3server"
)

// Limits of the suite, in one place. They bound waits; nothing asserts
// that anything is fast (benchmarks measure speed).
var limits = struct {
	ClusterReady time.Duration // apply → CacheCluster Running
	PodRestart   time.Duration // a killed or deleted pod serving again
	Cleanup      time.Duration // deletion → processes and data gone
	Poll         time.Duration
}{
	ClusterReady: 3 * time.Minute,
	PodRestart:   2 * time.Minute,
	Cleanup:      2 * time.Minute,
	Poll:         250 * time.Millisecond,
}

// backupStallTimeout is the manager's --backup-stall-timeout in the suite:
// shorter than the default, so a stalled backup is given up within a
// test's time. A healthy save reports progress every second.
const backupStallTimeout = 20 * time.Second

var (
	stateDir   string
	managerBin string
	cliBin     string
	// s3 is the S3 server backups go to.
	s3      *s3server.Server
	env     *cluster.Cluster
	k8s     client.Client
	scheme  = kruntime.NewScheme()
	repo    string
	binDir  string
	manager *exec.Cmd
)

// Tests share one cluster, one manager and one S3 server, each in its own
// namespace. A test that restarts the manager, the API server or a node,
// changes the CRD, or depends on where the scheduler puts pods runs alone;
// every other one calls t.Parallel() and runs after those, -parallel at a
// time (make e2e: E2E_PARALLEL, 3). A new test is parallel unless it does
// one of those things.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	repo = filepath.Join(filepath.Dir(file), "..", "..")
	binDir = filepath.Join(repo, "bin")
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e: the process-backed cluster needs root (network and mount namespaces)")
		return 1
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: redis-server is missing: apt-get install redis-server redis-tools")
		return 1
	}
	_ = clientgoscheme.AddToScheme(scheme)
	_ = cachev1alpha1.AddToScheme(scheme)
	ctrllog.SetLogger(logr.Discard())

	managerBin, cliBin = filepath.Join(binDir, "manager"), filepath.Join(binDir, "kubectl-cache")
	for bin, pkg := range map[string]string{managerBin: "./cmd/manager", cliBin: "./cmd/kubectl-cache"} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Dir, build.Stdout, build.Stderr = repo, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: building", pkg+":", err)
			return 1
		}
	}

	dir, err := os.MkdirTemp("", "cacheops-e2e-")
	stateDir = dir
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// A test image: a valkey-server that does not start on a volume that
	// holds data.
	// Not under /tmp: pods mount their own /tmp.
	imageDir, err := os.MkdirTemp("/var/tmp", "cacheops-e2e-images-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(imageDir)
	script, err := refusingImageScript(imageDir)
	if err == nil {
		err = os.Chmod(imageDir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	images := append(cluster.DefaultImages(), cluster.OperatorImage(managerBin), cluster.Image{
		Pattern: strings.Split(refusingImage, ":")[0] + ":*", Entrypoint: script,
		Binaries: map[string]string{"valkey-server": script, "valkey-cli": "/usr/bin/valkey-cli"},
	})

	// What another run left on this machine is reported, not blamed on
	// this suite: only what appears during the suite fails it.
	before := leftovers()
	if len(before) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: warning: left behind by an earlier run, before this suite started (not counted against it):\n  %s\n", strings.Join(before, "\n  "))
	}
	ctx := context.Background()
	start := time.Now()
	env, err = cluster.Start(ctx, cluster.Options{
		Dir:            dir,
		BinDir:         binDir,
		Images:         images,
		CRDDirectories: []string{filepath.Join(repo, "charts", "cacheops", "crds")},
		Nodes: []cluster.NodeOptions{
			{Name: "node-a", Zone: "zone-a"}, {Name: "node-b", Zone: "zone-b"}, {Name: "node-c", Zone: "zone-c"},
		},
		Bridge: "cacheopse2e",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the cluster:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: cluster up in %s; state in %s\n", time.Since(start).Round(time.Millisecond), dir)
	code := func() int {
		defer env.Stop()
		k8s, err = client.New(env.Config(), client.Options{Scheme: scheme})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		s3, err = s3server.Start(binDir, filepath.Join(dir, "s3"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: starting the S3 server:", err)
			return 1
		}
		defer s3.Stop()
		if err := startManager(managerBin, dir); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer stopManager()
		code := m.Run()
		if code != 0 {
			fmt.Fprintf(os.Stderr, "e2e: logs are in %s (manager.log, logs/, logs/pods/)\n", dir)
		}
		return code
	}()
	if leaks := slices.DeleteFunc(leftovers(), func(l string) bool { return slices.Contains(before, l) }); len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: processes or namespaces left behind after the suite:\n  %s\n", strings.Join(leaks, "\n  "))
		return 1
	}
	fmt.Fprintln(os.Stderr, "e2e: nothing left running")
	// CACHEOPS_E2E_KEEP=1 keeps the logs of a passing run too.
	if code == 0 && os.Getenv("CACHEOPS_E2E_KEEP") == "" {
		_ = os.RemoveAll(dir)
	}
	return code
}

// killManager kills the operator at once (SIGKILL), as a crash would.
func killManager() {
	if manager != nil && manager.Process != nil {
		_ = manager.Process.Kill()
		_ = manager.Wait()
	}
}

// metricsAddr is where the running manager serves its metrics.
var metricsAddr string

// metric reads one sample of the manager's metrics: the value of the line
// that starts with name{labels} (labels in Prometheus' order).
func metric(g Gomega, series string) float64 {
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			g.Expect(err).NotTo(HaveOccurred())
			return f
		}
	}
	g.Expect(series).To(BeEmpty(), "no such series in the manager's metrics")
	return 0
}

// startManager runs the real operator binary against the cluster, with
// extra flags if given.
func startManager(bin, dir string, extra ...string) error {
	logf, err := os.OpenFile(filepath.Join(dir, "manager.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// A free port for the metrics, which some tests read.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	metricsAddr = l.Addr().String()
	l.Close()
	// Short self-healing thresholds so the suite can watch them act.
	args := []string{"--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=127.0.0.1:0",
		"--recreate-not-ready-after=20s", "--majority-down-after=10s", "--upgrade-step-deadline=30s", "--recommend-after=10s",
		"--backup-stall-timeout=" + backupStallTimeout.String()}
	// CACHEOPS_E2E_MANAGER_ARGS adds flags, e.g. --zap-log-level=debug.
	args = append(args, strings.Fields(os.Getenv("CACHEOPS_E2E_MANAGER_ARGS"))...)
	args = append(args, extra...)
	manager = exec.Command(bin, args...)
	manager.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig())
	manager.Stdout, manager.Stderr = logf, logf
	manager.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return manager.Start()
}

// managerExit waits up to timeout for the manager to exit on its own and
// returns its exit code.
func managerExit(timeout time.Duration) (int, error) {
	done := make(chan error, 1)
	go func() { done <- manager.Wait() }()
	select {
	case <-done:
		return manager.ProcessState.ExitCode(), nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("the manager still runs after %s", timeout)
	}
}

func stopManager() {
	if manager == nil || manager.Process == nil {
		return
	}
	_ = manager.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = manager.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = manager.Process.Kill()
		<-done
	}
}

// leftovers lists what the suite started and did not stop: control-plane
// and manager processes from bin/, redis-server processes in a network
// namespace other than ours, and pod network namespaces.
func leftovers() []string {
	var out []string
	self, _ := os.Readlink("/proc/self/ns/net")
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid := e.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		exe, err := os.Readlink("/proc/" + pid + "/exe")
		if err != nil {
			continue
		}
		ns, _ := os.Readlink("/proc/" + pid + "/ns/net")
		cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		line := strings.ReplaceAll(strings.TrimSpace(string(cmdline)), "\x00", " ")
		switch {
		case strings.HasPrefix(exe, binDir+"/"):
			out = append(out, fmt.Sprintf("pid %s: %s", pid, line))
		case strings.HasSuffix(exe, "/redis-server") && ns != self:
			out = append(out, fmt.Sprintf("pid %s: %s (pod network namespace)", pid, line))
		}
	}
	nsList, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(nsList), "\n") {
		if strings.HasPrefix(l, "cacheops-") {
			out = append(out, "network namespace "+strings.Fields(l)[0])
		}
	}
	return out
}
