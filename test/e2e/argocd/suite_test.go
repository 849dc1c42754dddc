//go:build e2e

// Package argocd is the end-to-end suite with a real Argo CD in the loop:
// Argo CD's application-controller and repo-server run as local processes
// against the process-backed cluster and sync from a git repository the
// tests commit to. Argo CD installs the operator too (an app of apps with
// charts/cacheops): its manager runs as a pod of the cluster, the
// operator's image mapped to the manager built from this tree. It has its
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
	Synced    time.Duration // commit → Application Synced and Healthy
	Removed   time.Duration // commit removing a file → CacheCluster gone
	Installed time.Duration // root Application created → everything Synced and Healthy
	Recommend time.Duration // memory pressure → a recommendation in status
	Poll      time.Duration
	// SteadyWindow is how long the steady state is watched for writes: two
	// periodic resyncs of the Applications (argocd.AppResyncSeconds).
	SteadyWindow time.Duration
}{
	Synced:       5 * time.Minute,
	Removed:      3 * time.Minute,
	Installed:    5 * time.Minute,
	Recommend:    2 * time.Minute,
	Poll:         200 * time.Millisecond,
	SteadyWindow: 2*argocd.AppResyncSeconds*time.Second + 2*time.Second,
}

var (
	repo   string
	binDir string
	cliBin string
	env    *cluster.Cluster
	k8s    client.Client
	scheme = kruntime.NewScheme()
	argo   *argocd.ArgoCD
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
	// The manager and the CLI are built from this tree, not into bin/,
	// which other checkouts may share. The manager is the operator image's
	// program: not under /tmp, which pods mount privately, and readable by
	// the image's non-root user.
	imageDir, err := os.MkdirTemp("/var/tmp", "cacheops-e2e-argocd-image-")
	if err == nil {
		err = os.Chmod(imageDir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(imageDir)
	managerBin, cli := filepath.Join(imageDir, "manager"), filepath.Join(dir, "kubectl-cache")
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
		// Argo CD's own CRDs only: Argo CD installs cacheops's, from the
		// chart.
		CRDDirectories: []string{argocd.CRDDirectory(moduleDir)},
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
		var snippets []string
		for _, f := range []string{"argocd-cm-snippet.yaml", "argocd-cm-application-health.yaml"} {
			b, err := os.ReadFile(filepath.Join(repo, "gitops", "argocd", f))
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			snippets = append(snippets, string(b))
		}
		argoDir := filepath.Join(dir, "argocd")
		if err := os.MkdirAll(argoDir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		argo, err = argocd.Start(ctx, k8s, argocd.Options{
			Binary: argoBin, ModuleDir: moduleDir, Dir: argoDir, Helm: filepath.Join(binDir, "helm"),
			Kubeconfig: env.Kubeconfig(), HealthSnippets: snippets,
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e-argocd:", err)
			return 1
		}
		defer argo.Stop()
		code := m.Run()
		if code != 0 {
			fmt.Fprintf(os.Stderr, "e2e-argocd: logs are in %s (argocd/*.log, logs/; the manager pod's in the pod log folder)\n", dir)
		}
		return code
	}()
	// The manager pod's process may still be ending when the nodes have
	// stopped; give it the chart's grace period, then count what is left.
	leaks := leftovers(dir, imageDir)
	for deadline := time.Now().Add(15 * time.Second); len(leaks) > 0 && time.Now().Before(deadline); leaks = leftovers(dir, imageDir) {
		time.Sleep(250 * time.Millisecond)
	}
	if len(leaks) > 0 {
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
// from bin/ (the control plane, Argo CD), from the state folder or the
// image folder (the manager pod), redis-server processes in a pod's network
// namespace or serving Argo CD's cache from the state folder.
func leftovers(dir, imageDir string) []string {
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
		case strings.HasPrefix(exe, dir+"/"), strings.HasPrefix(cwd, dir), strings.HasPrefix(exe, imageDir+"/"):
			out = append(out, fmt.Sprintf("pid %s: %s", pid, line))
		case strings.HasSuffix(exe, "/redis-server") && ns != self && strings.Contains(cwd, dir):
			out = append(out, fmt.Sprintf("pid %s: %s (pod network namespace)", pid, line))
		}
	}
	return out
}
