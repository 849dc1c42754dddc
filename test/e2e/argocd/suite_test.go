//go:build e2e

// Package argocd is the end-to-end suite with a real Argo CD in the loop:
// the operator binary and Argo CD's application-controller and repo-server
// run as local processes against the process-backed cluster, and Argo CD
// syncs CacheClusters from a git repository the tests commit to. It has its
// own TestMain (make e2e-argocd) so the main e2e suite is unchanged.
package argocd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/test/argocd"
	"github.com/cacheops/cacheops/test/cluster"
)

// Limits of the suite, in one place. They bound waits on a loaded 2-core
// machine; nothing asserts that anything is fast: measured times are logged.
var limits = struct {
	Synced  time.Duration // commit → Application Synced and Healthy
	Removed time.Duration // commit removing a file → CacheCluster gone
	Poll    time.Duration
}{
	Synced:  5 * time.Minute,
	Removed: 3 * time.Minute,
	Poll:    200 * time.Millisecond,
}

var (
	repo    string
	binDir  string
	cliBin  string
	env     *cluster.Cluster
	k8s     client.Client
	scheme  = kruntime.NewScheme()
	argo    *argocd.ArgoCD
	manager *exec.Cmd
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	repo = filepath.Join(filepath.Dir(file), "..", "..", "..")
	binDir = filepath.Join(repo, "bin")
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e-argocd: the process-backed cluster needs root")
		return 1
	}
	argoBin := filepath.Join(binDir, "argocd")
	if _, err := os.Stat(argoBin); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-argocd: bin/argocd is missing: run make tools")
		return 1
	}
	_ = clientgoscheme.AddToScheme(scheme)
	_ = cachev1alpha1.AddToScheme(scheme)
	ctrllog.SetLogger(logr.Discard())

	dir, err := os.MkdirTemp("", "cacheops-e2e-argocd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The manager and the CLI are built from this tree into the state
	// folder, not bin/, which other checkouts may share.
	managerBin, cli := filepath.Join(dir, "manager"), filepath.Join(dir, "kubectl-cache")
	cliBin = cli
	for bin, pkg := range map[string]string{managerBin: "./cmd/manager", cli: "./cmd/kubectl-cache"} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Dir, build.Stdout, build.Stderr = repo, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e-argocd: building", pkg+":", err)
			return 1
		}
	}
	moduleDir, err := argocd.ModuleDir(repo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e-argocd:", err)
		return 1
	}

	ctx := context.Background()
	start := time.Now()
	env, err = cluster.Start(ctx, cluster.Options{
		Dir:    dir,
		BinDir: binDir,
		Images: append(cluster.DefaultImages(), cluster.OperatorImage(managerBin)),
		CRDDirectories: []string{
			filepath.Join(repo, "charts", "cacheops", "crds"),
			argocd.CRDDirectory(moduleDir),
		},
		Nodes: []cluster.NodeOptions{
			{Name: "node-a", Zone: "zone-a"}, {Name: "node-b", Zone: "zone-b"}, {Name: "node-c", Zone: "zone-c"},
		},
		PodCIDR: "10.247.0.0/16",
		Bridge:  "cacheopsargo",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e-argocd: starting the cluster:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e-argocd: cluster up in %s; state in %s\n", time.Since(start).Round(time.Millisecond), dir)
	code := func() int {
		defer env.Stop()
		k8s, err = client.New(env.Config(), client.Options{Scheme: scheme})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := startManager(managerBin, dir); err != nil {
			fmt.Fprintln(os.Stderr, "e2e-argocd:", err)
			return 1
		}
		defer stopManager()
		snippet, err := os.ReadFile(filepath.Join(repo, "gitops", "argocd", "argocd-cm-snippet.yaml"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		argoDir := filepath.Join(dir, "argocd")
		if err := os.MkdirAll(argoDir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		argo, err = argocd.Start(ctx, k8s, argocd.Options{
			Binary: argoBin, ModuleDir: moduleDir, Dir: argoDir,
			Kubeconfig: env.Kubeconfig(), HealthSnippet: string(snippet),
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e-argocd:", err)
			return 1
		}
		defer argo.Stop()
		code := m.Run()
		if code != 0 {
			fmt.Fprintf(os.Stderr, "e2e-argocd: logs are in %s (manager.log, argocd/*.log, logs/)\n", dir)
		}
		return code
	}()
	if leaks := leftovers(dir); len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "e2e-argocd: processes left behind after the suite:\n  %s\n", strings.Join(leaks, "\n  "))
		return 1
	}
	fmt.Fprintln(os.Stderr, "e2e-argocd: nothing left running")
	if code == 0 && os.Getenv("CACHEOPS_E2E_KEEP") == "" {
		_ = os.RemoveAll(dir)
	}
	fmt.Fprintf(os.Stderr, "e2e-argocd: suite ran in %s\n", time.Since(start).Round(time.Second))
	return code
}

// leftovers lists what the suite started and did not stop: processes run
// from bin/ (the control plane, Argo CD) or from the state folder (the
// manager), redis-server processes in a pod's network namespace or serving
// Argo CD's cache from the state folder.
func leftovers(dir string) []string {
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
		cwd, _ := os.Readlink("/proc/" + pid + "/cwd")
		cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		line := strings.ReplaceAll(strings.TrimSpace(string(cmdline)), "\x00", " ")
		switch {
		case strings.HasPrefix(exe, binDir+"/") && strings.Contains(line, dir):
			out = append(out, fmt.Sprintf("pid %s: %s", pid, line))
		case strings.HasPrefix(exe, dir+"/"), strings.HasPrefix(cwd, dir):
			out = append(out, fmt.Sprintf("pid %s: %s", pid, line))
		case strings.HasSuffix(exe, "/redis-server") && ns != self && strings.Contains(cwd, dir):
			out = append(out, fmt.Sprintf("pid %s: %s (pod network namespace)", pid, line))
		}
	}
	return out
}

// startManager runs the real operator binary against the cluster.
func startManager(bin, dir string) error {
	logf, err := os.Create(filepath.Join(dir, "manager.log"))
	if err != nil {
		return err
	}
	manager = exec.Command(bin, "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0")
	manager.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig())
	manager.Stdout, manager.Stderr = logf, logf
	manager.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return manager.Start()
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
