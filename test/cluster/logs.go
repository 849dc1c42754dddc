package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Logs of every container run are appended to one file per container in
// Cluster.PodLogDir(), and served through the pods/log API (kubectl logs).

func logWriter(c *containerRuntime) io.Writer {
	f, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return io.Discard
	}
	return closingWriter{f}
}

type closingWriter struct{ f *os.File }

func (w closingWriter) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	w.f.Close()
	return n, err
}

func (p *provider) container(ns, pod, name string) (*podRuntime, *containerRuntime, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.pods[podKey(ns, pod)]
	if !ok {
		return nil, nil, errdefs.NotFoundf("pod %s/%s is not on this node", ns, pod)
	}
	for _, c := range append(append([]*containerRuntime{}, r.inits...), r.containers...) {
		if c.spec.Name == name || (name == "" && !c.init) {
			return r, c, nil
		}
	}
	return nil, nil, errdefs.NotFoundf("pod %s/%s has no container %q", ns, pod, name)
}

// GetContainerLogs serves `kubectl logs` (tail and byte limits honoured;
// follow returns what exists).
func (p *provider) GetContainerLogs(_ context.Context, ns, pod, name string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	_, c, err := p.container(ns, pod, name)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	path := c.logPath
	p.mu.Unlock()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) || path == "" {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	if err != nil {
		return nil, err
	}
	if opts.Tail > 0 {
		data = tail(data, opts.Tail)
	}
	if opts.LimitBytes > 0 && len(data) > opts.LimitBytes {
		data = data[:opts.LimitBytes]
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// podLogFile is where a container's log is kept: NAMESPACE_POD_CONTAINER.log.
func podLogFile(dir, namespace, pod, container string) string {
	return filepath.Join(dir, fmt.Sprintf("%s_%s_%s.log", namespace, pod, container))
}

// tail returns the last n lines of a log.
func tail(data []byte, n int) []byte {
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return append(bytes.Join(lines, []byte("\n")), '\n')
}

// PodLogTail returns the last lines of a container's log, every run of it
// (restarts append), as kept in PodLogDir. Tests put it in the message of a
// wait that failed: a container that never got ready says why there.
func (c *Cluster) PodLogTail(namespace, pod, container string, lines int) (string, error) {
	data, err := os.ReadFile(podLogFile(c.podLogDir, namespace, pod, container))
	if err != nil {
		return "", err
	}
	if len(data) == 0 {
		return "", nil
	}
	return string(tail(data, lines)), nil
}

// RunInContainer serves `kubectl exec`: the command runs in the container's
// network and mount namespaces with its environment and user.
func (p *provider) RunInContainer(ctx context.Context, ns, pod, name string, cmd []string, attach api.AttachIO) error {
	r, c, err := p.container(ns, pod, name)
	if err != nil {
		return err
	}
	if len(cmd) == 0 {
		return errdefs.InvalidInput("no command")
	}
	p.mu.Lock()
	pid, env, image := c.pid, c.env, c.image
	uid, gid, _ := identity(r.pod, &c.spec)
	running := c.state.Running != nil
	p.mu.Unlock()
	if !running {
		return errdefs.InvalidInput("container is not running")
	}
	prog, err := resolveBinary(image, c.spec.Image, cmd[0])
	if err != nil {
		return err
	}
	x := inContainer(ctx, pid, uid, gid, env, prog, cmd[1:])
	x.Stdin, x.Stdout, x.Stderr = attach.Stdin(), attach.Stdout(), attach.Stderr()
	return x.Run()
}

// AttachToContainer is not supported: containers here have no terminal.
func (p *provider) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return errdefs.InvalidInput("attach is not supported by the process-backed node")
}

// GetStatsSummary is not supported: no cgroup accounting here.
func (p *provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return nil, errdefs.InvalidInput("stats are not supported by the process-backed node")
}

// GetMetricsResource is not supported: no cgroup accounting here.
func (p *provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, errdefs.InvalidInput("resource metrics are not supported by the process-backed node")
}

// PortForward is not needed: pod addresses are reachable from this machine.
func (p *provider) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return errdefs.InvalidInput("port-forward is not supported; connect to the pod IP directly")
}
