package cluster

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// controlPlane is etcd and kube-apiserver (started through envtest, which
// handles certificates and readiness), plus kube-controller-manager and
// kube-scheduler as child processes of ours.
type controlPlane struct {
	env        *envtest.Environment
	config     *rest.Config
	kubeconfig string
	dir        string
	bin        string
	logDir     string
	components map[string]*exec.Cmd
	args       map[string][]string
}

func startControlPlane(ctx context.Context, o Options) (*controlPlane, error) {
	cp := &controlPlane{dir: o.Dir, bin: o.BinDir, logDir: filepath.Join(o.Dir, "logs"), components: map[string]*exec.Cmd{}, args: map[string][]string{}}
	if err := os.MkdirAll(cp.logDir, 0o755); err != nil {
		return nil, err
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make tools`", b, o.BinDir)
		}
	}

	certDir := filepath.Join(o.Dir, "pki")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	cp.env = &envtest.Environment{
		BinaryAssetsDirectory: o.BinDir,
		CRDDirectoryPaths:     o.CRDDirectories,
		ErrorIfCRDPathMissing: len(o.CRDDirectories) > 0,
		// A graceful stop drains long-running watches (60 s, below); give
		// it time, so a restart in a fault-injection test is a clean stop
		// and start.
		ControlPlaneStopTimeout: 90 * time.Second,
	}
	api := cp.env.ControlPlane.GetAPIServer()
	api.CertDir = certDir
	api.Out, api.Err = logFile(cp.logDir, "kube-apiserver.log")
	args := api.Configure()
	// ServiceAccount admission stays off (envtest's default): pods of ours
	// mount no token, and the controller-manager creates the accounts.
	args.Set("service-cluster-ip-range", "10.96.0.0/16")
	args.Set("allow-privileged", "true")
	args.Set("shutdown-delay-duration", "0s")
	// Known: a graceful stop waits for the open watches (every
	// component's) until the API server's 60 s shutdown timeout, so a
	// restart takes about 62 s. --shutdown-watch-termination-grace-period=3s
	// makes it 4 s, but in the one suite run with it the failover test
	// that follows the restart saw two master labels at once (cause not
	// understood yet), so the slow, long-proven stop stays for now.
	etcd := cp.env.ControlPlane.Etcd
	if etcd == nil {
		etcd = &envtest.Etcd{}
		cp.env.ControlPlane.Etcd = etcd
	}
	etcd.DataDir = filepath.Join(o.Dir, "etcd")
	etcd.Out, etcd.Err = logFile(cp.logDir, "etcd.log")

	cfg, err := cp.env.Start()
	if err != nil {
		_ = cp.env.Stop()
		return nil, fmt.Errorf("starting etcd and kube-apiserver: %w", err)
	}
	cp.config = cfg

	// An admin kubeconfig for people, kubectl and the other components.
	admin, err := cp.env.AddUser(envtest.User{Name: "cacheops-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		cp.stop()
		return nil, fmt.Errorf("creating admin user: %w", err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		cp.stop()
		return nil, err
	}
	cp.kubeconfig = filepath.Join(o.Dir, "kubeconfig")
	if err := os.WriteFile(cp.kubeconfig, renameContext(kc), 0o600); err != nil {
		cp.stop()
		return nil, err
	}
	cp.config = admin.Config()

	ca := filepath.Join(certDir, "ca.crt")
	if err := os.WriteFile(ca, cfg.CAData, 0o644); err != nil {
		cp.stop()
		return nil, err
	}
	grace := o.NodeMonitorGracePeriod
	if grace <= 0 {
		grace = DefaultNodeMonitorGracePeriod
	}
	qps := cmp.Or(max(o.ControllerManagerQPS, 0), DefaultControllerManagerQPS)
	kcm := []string{
		"--kubeconfig=" + cp.kubeconfig,
		"--authentication-kubeconfig=" + cp.kubeconfig,
		"--authorization-kubeconfig=" + cp.kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers=*,-node-ipam-controller",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file=" + filepath.Join(certDir, "sa-signer.key"),
		"--root-ca-file=" + ca,
		// Quick reactions for tests: a silent node is NotReady after 10s
		// (Options.NodeMonitorGracePeriod).
		"--node-monitor-period=1s",
		"--node-monitor-grace-period=" + grace.String(),
		"--concurrent-statefulset-syncs=10",
		// Options.ControllerManagerQPS.
		fmt.Sprintf("--kube-api-qps=%d", qps),
		fmt.Sprintf("--kube-api-burst=%d", 2*qps),
		// Kubernetes 1.37's beta PersistentVolumeClaimUnusedSinceTime
		// writes an Unused condition to every new claim's status while
		// the scheduler writes its selected-node annotation: 806 of 900
		// pods in the scale benchmark failed their first scheduling on
		// that conflict, and waited 131 s (median) to be Ready after it
		// (kubernetes/kubernetes#140833, docs/scale.md, run 10).
		"--feature-gates=PersistentVolumeClaimUnusedSinceTime=false",
		"--terminated-pod-gc-threshold=10",
	}
	if err := cp.startComponent(ctx, "kube-controller-manager", kcm); err != nil {
		cp.stop()
		return nil, err
	}
	sched := []string{
		"--kubeconfig=" + cp.kubeconfig,
		"--authentication-kubeconfig=" + cp.kubeconfig,
		"--authorization-kubeconfig=" + cp.kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	}
	if err := cp.startComponent(ctx, "kube-scheduler", sched); err != nil {
		cp.stop()
		return nil, err
	}
	return cp, nil
}

// renameContext names the kubeconfig's context after the project, so a
// person switching contexts sees what it is.
func renameContext(data []byte) []byte {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return data
	}
	out := clientcmdapi.NewConfig()
	for _, c := range cfg.Clusters {
		out.Clusters["cacheops-dev"] = c
	}
	for _, a := range cfg.AuthInfos {
		out.AuthInfos["cacheops-admin"] = a
	}
	out.Contexts["cacheops-dev"] = &clientcmdapi.Context{Cluster: "cacheops-dev", AuthInfo: "cacheops-admin", Namespace: "default"}
	out.CurrentContext = "cacheops-dev"
	b, err := clientcmd.Write(*out)
	if err != nil {
		return data
	}
	return b
}

func (cp *controlPlane) startComponent(ctx context.Context, name string, args []string) error {
	out, _ := logFile(cp.logDir, name+".log")
	cmd := exec.Command(filepath.Join(cp.bin, name), args...)
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, and killed with us if we die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	cp.components[name] = cmd
	cp.args[name] = args
	go func() { _ = cmd.Wait() }()
	return nil
}

// stopComponent ends one component: SIGTERM, SIGKILL after 5 s.
func (cp *controlPlane) stopComponent(name string) {
	if cmd := cp.components[name]; cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		waitGone(cmd.Process.Pid, 5*time.Second)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	delete(cp.components, name)
}

// stop ends the components, then kube-apiserver and etcd.
func (cp *controlPlane) stop() {
	for name := range cp.components {
		cp.stopComponent(name)
	}
	if cp.env != nil {
		_ = cp.env.Stop()
	}
}

// restartAPIServer stops kube-apiserver and starts it again on the same port
// with the same certificates, for fault-injection tests. kube-scheduler and
// kube-controller-manager are restarted after it: their watches did not
// always resume against the restarted process (CI saw the scheduler stop
// scheduling for good after "Scheduler cache is corrupted", and the
// controller manager's caches stay behind what it wrote), which would fail
// a test of the operator for the components' sake. The operator is not
// restarted: what the tests check is that it carries on by itself.
func (cp *controlPlane) restartAPIServer() error {
	api := cp.env.ControlPlane.GetAPIServer()
	start := time.Now()
	defer func() {
		fmt.Fprintf(cp.logWriter(), "cluster: kube-apiserver restarted in %s\n", time.Since(start).Round(time.Millisecond))
	}()
	if err := api.Stop(); err != nil {
		return fmt.Errorf("stopping kube-apiserver: %w", err)
	}
	if err := api.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver: %w", err)
	}
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		args, ok := cp.args[name]
		if !ok {
			continue
		}
		cp.stopComponent(name)
		if err := cp.startComponent(context.Background(), name, args); err != nil {
			return err
		}
	}
	return nil
}

func waitGone(pid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); err != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func logFile(dir, name string) (*os.File, *os.File) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil
	}
	return f, f
}

// logWriter appends to the cluster's own log.
func (cp *controlPlane) logWriter() *os.File {
	f, _ := logFile(cp.logDir, "cluster.log")
	return f
}
