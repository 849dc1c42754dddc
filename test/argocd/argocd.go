package argocd

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Namespace is where Argo CD and its Applications live.
const Namespace = "argocd"

// Version is the Argo CD release hack/tools/argocd builds.
const Version = "v3.6.1"

// Settings the tests run Argo CD with; docs/gitops.md lists them.
const (
	// RevisionCacheExpiration is how long the repo-server trusts a branch
	// head it resolved (default 3 minutes). Tests also ask for a hard
	// refresh after each commit, as a git webhook would.
	RevisionCacheExpiration = 5 * time.Second
	// AppResyncSeconds is the controller's periodic refresh (default 120 s).
	AppResyncSeconds = 15
)

// Options configure Start.
type Options struct {
	// Binary is the Argo CD binary (bin/argocd).
	Binary string
	// ModuleDir is the argo-cd module's source (ModuleDir finds it): it
	// holds hack/git-verify-wrapper.sh.
	ModuleDir string
	// Dir receives the logs and the processes' state.
	Dir string
	// Kubeconfig is the cluster Argo CD runs against and deploys to (its
	// in-cluster destination https://kubernetes.default.svc).
	Kubeconfig string
	// Helm is the helm CLI (bin/helm), which the repo-server runs to render
	// a Helm source such as charts/cacheops.
	Helm string
	// HealthSnippets are argocd-cm fragments (gitops/argocd/argocd-cm-*.yaml)
	// whose data is merged into argocd-cm.
	HealthSnippets []string
}

// ArgoCD is a running Argo CD. Stop it when done.
type ArgoCD struct {
	procs []*proc
}

// proc is a started process; done closes when it has exited and was
// reaped.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// ModuleDir returns the directory of the argo-cd module's source in the
// module cache, downloading it through the module proxy when missing.
// repo is the cacheops checkout.
func ModuleDir(repo string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/argoproj/argo-cd/v3@"+Version)
	cmd.Dir = filepath.Join(repo, "hack", "tools", "argocd")
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=go1.27.3")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download argo-cd: %w", err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", err
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download argo-cd: %s", m.Error)
	}
	return m.Dir, nil
}

// CRDDirectory holds Argo CD's CRDs (Application, AppProject, ApplicationSet).
func CRDDirectory(moduleDir string) string {
	return filepath.Join(moduleDir, "manifests", "crds")
}

// Start installs Argo CD's namespace objects with c and starts redis, the
// repo-server and the application-controller. The CRDs must exist.
func Start(ctx context.Context, c client.Client, o Options) (*ArgoCD, error) {
	if err := install(ctx, c, o.HealthSnippets); err != nil {
		return nil, fmt.Errorf("argocd: installing the namespace objects: %w", err)
	}
	pathDir := filepath.Join(o.Dir, "path")
	if err := os.MkdirAll(pathDir, 0o755); err != nil {
		return nil, err
	}
	// v3.6.1 runs hack/git-verify-wrapper.sh even with GPG off; the module
	// cache's copy is read-only, so put an executable copy on PATH.
	wrapper, err := os.ReadFile(filepath.Join(o.ModuleDir, "hack", "git-verify-wrapper.sh"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(pathDir, "git-verify-wrapper.sh"), wrapper, 0o755); err != nil {
		return nil, err
	}
	if o.Helm != "" {
		if err := os.Symlink(o.Helm, filepath.Join(pathDir, "helm")); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	redisAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	repoAddr := "127.0.0.1:" + strconv.Itoa(ports[1])
	a := &ArgoCD{}
	env := append(os.Environ(),
		"KUBECONFIG="+o.Kubeconfig,
		"ARGOCD_FAKE_IN_CLUSTER=true",
		"ARGOCD_GPG_ENABLED=false",
		"PATH="+pathDir+":"+os.Getenv("PATH"),
		"HOME="+o.Dir,
	)
	start := func(name, bin string, env []string, args ...string) error {
		logf, err := os.Create(filepath.Join(o.Dir, name+".log"))
		if err != nil {
			return err
		}
		cmd := exec.Command(bin, args...)
		cmd.Env, cmd.Stdout, cmd.Stderr, cmd.Dir = env, logf, logf, o.Dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logf.Close()
			return fmt.Errorf("starting %s: %w", name, err)
		}
		p := &proc{cmd: cmd, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
		a.procs = append(a.procs, p)
		return nil
	}
	if err := start("redis", "redis-server", os.Environ(), "--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", o.Dir); err != nil {
		return nil, err
	}
	if err := start("repo-server", o.Binary, append(env, "ARGOCD_BINARY_NAME=argocd-repo-server"),
		"--address", "127.0.0.1", "--port", strconv.Itoa(ports[1]), "--metrics-address", "127.0.0.1",
		"--metrics-port", strconv.Itoa(ports[2]), "--disable-tls", "--client-ca-path=", "--redis", redisAddr,
		"--revision-cache-expiration", RevisionCacheExpiration.String()); err != nil {
		a.Stop()
		return nil, err
	}
	// The controller retries a repo-server it cannot reach, quietly; a
	// repo-server that exits at once is better told now.
	if err := a.waitListening(repoAddr, 1, time.Minute); err != nil {
		a.Stop()
		return nil, fmt.Errorf("argocd-repo-server (log in %s): %w", filepath.Join(o.Dir, "repo-server.log"), err)
	}
	if err := start("application-controller", o.Binary, append(env, "ARGOCD_BINARY_NAME=argocd-application-controller"),
		"--namespace", Namespace, "--redis", redisAddr, "--repo-server", repoAddr, "--repo-server-plaintext",
		"--metrics-port", strconv.Itoa(ports[3]), "--persist-resource-health",
		"--app-resync", strconv.Itoa(AppResyncSeconds), "--status-processors", "4", "--operation-processors", "2"); err != nil {
		a.Stop()
		return nil, err
	}
	return a, nil
}

// waitListening waits until something accepts connections at addr while
// the process procs[i] still runs.
func (a *ArgoCD) waitListening(addr string, i int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-a.procs[i].done:
			return fmt.Errorf("exited: %v", a.procs[i].cmd.ProcessState)
		default:
		}
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens at %s after %s", addr, timeout)
}

// Stop ends every process Start began: SIGTERM, then SIGKILL after 15 s.
func (a *ArgoCD) Stop() {
	for i := len(a.procs) - 1; i >= 0; i-- {
		p := a.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	a.procs = nil
}

// install creates what Argo CD's install manifests would: the namespace,
// argocd-cm (with the health snippets' data), argocd-rbac-cm,
// argocd-cmd-params-cm, argocd-secret and the AppProject default.
func install(ctx context.Context, c client.Client, healthSnippets []string) error {
	data := map[string]string{}
	for i, snippet := range healthSnippets {
		cm := &corev1.ConfigMap{}
		if err := yaml.Unmarshal([]byte(snippet), cm); err != nil {
			return fmt.Errorf("health snippet %d: %w", i+1, err)
		}
		if len(cm.Data) == 0 {
			return fmt.Errorf("health snippet %d has no data", i+1)
		}
		maps.Copy(data, cm.Data)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	labels := func(name string) map[string]string {
		return map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "argocd"}
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: labels(name)}
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}},
		&corev1.ConfigMap{ObjectMeta: meta("argocd-cm"), Data: data},
		&corev1.ConfigMap{ObjectMeta: meta("argocd-rbac-cm")},
		&corev1.ConfigMap{ObjectMeta: meta("argocd-cmd-params-cm")},
		&corev1.Secret{ObjectMeta: meta("argocd-secret"), Data: map[string][]byte{
			"server.secretkey": []byte(base64.RawStdEncoding.EncodeToString(key)),
		}},
		project(),
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// project is the AppProject default as Argo CD's install creates it: any
// repository, any destination, any kind.
func project() *unstructured.Unstructured {
	p := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "AppProject",
		"metadata":   map[string]any{"name": "default", "namespace": Namespace},
		"spec": map[string]any{
			"sourceRepos":              []any{"*"},
			"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		},
	}}
	return p
}

// freePorts returns n ports nothing listens on right now.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
