//go:build e2e

// Package benchmarks measures the process-backed cluster: how long it takes
// to start, how long examples/basic.yaml takes to become Ready on it, and how
// much memory it all uses. Run with `make bench`; figures go to
// bench/devcluster.json.
package benchmarks

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/test/cluster"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// BenchmarkDevcluster: "baseline" starts only etcd and kube-apiserver (what
// envtest gives); "full" starts the whole process-backed cluster (controller
// manager, scheduler, three nodes, pod network, provisioner), runs the
// manager and applies examples/basic.yaml until it is Ready.
func BenchmarkDevcluster(b *testing.B) {
	root := repoRoot()
	bin := filepath.Join(root, "bin")
	manager := filepath.Join(bin, "manager")
	build := exec.Command("go", "build", "-o", manager, "./cmd/manager")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building manager: %v\n%s", err, out)
	}

	b.Run("baseline", func(b *testing.B) {
		var start time.Duration
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			c, err := cluster.Start(context.Background(), cluster.Options{Dir: b.TempDir(), BinDir: bin, ControlPlaneOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			start += time.Since(t0)
			c.Stop()
		}
		b.ReportMetric(start.Seconds()/float64(b.N), "start_s")
	})

	b.Run("full", func(b *testing.B) {
		var start, ready time.Duration
		var peak float64
		for i := 0; i < b.N; i++ {
			s, r, p := runFull(b, root, bin, manager)
			start += s
			ready += r
			if p > peak {
				peak = p
			}
		}
		b.ReportMetric(start.Seconds()/float64(b.N), "start_s")
		b.ReportMetric(ready.Seconds()/float64(b.N), "apply_to_ready_s")
		b.ReportMetric(peak, "peak_rss_MiB")
	})
}

func runFull(b *testing.B, root, bin, manager string) (time.Duration, time.Duration, float64) {
	dir := b.TempDir()
	stopSampling := make(chan struct{})
	peak := make(chan float64, 1)
	go func() {
		max := 0.0
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			if m := rssMiB(bin); m > max {
				max = m
			}
			select {
			case <-stopSampling:
				peak <- max
				return
			case <-t.C:
			}
		}
	}()

	t0 := time.Now()
	c, err := cluster.Start(context.Background(), cluster.Options{
		Dir: dir, BinDir: bin,
		CRDDirectories: []string{filepath.Join(root, "charts", "cacheops", "crds")},
		Nodes:          []cluster.NodeOptions{{Name: "node-a", Zone: "zone-a"}, {Name: "node-b", Zone: "zone-b"}, {Name: "node-c", Zone: "zone-c"}},
		Bridge:         "cacheopsbench",
		PodCIDR:        "10.246.0.0/16",
	})
	if err != nil {
		b.Fatal(err)
	}
	startup := time.Since(t0)
	defer c.Stop()

	cmd := exec.Command(manager, "--metrics-bind-address=0", "--health-probe-bind-address=0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()

	scheme := kruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = cachev1alpha1.AddToScheme(scheme)
	k8s, err := client.New(c.Config(), client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "examples", "basic.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	cc := &cachev1alpha1.CacheCluster{}
	if err := yaml.UnmarshalStrict(data, cc); err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	if err := k8s.Create(context.Background(), cc); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got := &cachev1alpha1.CacheCluster{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), got); err == nil &&
			got.Status.Phase == cachev1alpha1.PhaseRunning && meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionReady) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("examples/basic.yaml did not become Ready within 3 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	toReady := time.Since(t1)
	close(stopSampling)
	return startup, toReady, <-peak
}

// rssMiB sums the resident memory of this process (which hosts the nodes),
// the control plane and manager binaries from bin/, and redis-server
// processes in pod network namespaces.
func rssMiB(bin string) float64 {
	self, _ := os.Readlink("/proc/self/ns/net")
	total := 0.0
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
		mine := pid == strconv.Itoa(os.Getpid()) || strings.HasPrefix(exe, bin+"/") ||
			(strings.Contains(exe, "redis") && ns != self)
		if !mine {
			continue
		}
		status, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				f := strings.Fields(line)
				kb, _ := strconv.ParseFloat(f[1], 64)
				total += kb / 1024
			}
		}
	}
	return total
}
