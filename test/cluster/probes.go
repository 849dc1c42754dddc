package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probe runs a container's startup, readiness and liveness probes for real,
// as the kubelet does, until ctx ends (the process exited).
func (r *podRuntime) probe(ctx context.Context, c *containerRuntime) {
	p := r.p
	spec := c.spec
	if sp := spec.StartupProbe; sp != nil {
		if !sleepCtx(ctx, seconds(sp.InitialDelaySeconds, 0)) {
			return
		}
		failures := int32(0)
		for {
			err := r.check(ctx, c, sp)
			if err == nil {
				break
			}
			failures++
			if failures >= threshold(sp.FailureThreshold, 3) {
				r.kill(c, fmt.Sprintf("startup probe failed %d times, the last: %v", failures, err))
				return
			}
			if !sleepCtx(ctx, seconds(sp.PeriodSeconds, 10)) {
				return
			}
		}
		p.mu.Lock()
		c.started = true
		p.mu.Unlock()
		r.publish()
	}

	if lp := spec.LivenessProbe; lp != nil {
		go func() {
			if !sleepCtx(ctx, seconds(lp.InitialDelaySeconds, 0)) {
				return
			}
			failures := int32(0)
			for {
				if err := r.check(ctx, c, lp); err == nil {
					failures = 0
				} else if failures++; failures >= threshold(lp.FailureThreshold, 3) {
					r.kill(c, fmt.Sprintf("liveness probe failed %d times, the last: %v", failures, err))
					return
				}
				if !sleepCtx(ctx, seconds(lp.PeriodSeconds, 10)) {
					return
				}
			}
		}()
	}

	rp := spec.ReadinessProbe
	if rp == nil {
		p.mu.Lock()
		c.ready = true
		p.mu.Unlock()
		r.publish()
		return
	}
	if !sleepCtx(ctx, seconds(rp.InitialDelaySeconds, 0)) {
		return
	}
	successes, failures := int32(0), int32(0)
	for {
		err := r.check(ctx, c, rp)
		p.mu.Lock()
		was := c.ready
		if err == nil {
			failures = 0
			if successes++; successes >= threshold(rp.SuccessThreshold, 1) {
				c.ready = true
			}
		} else {
			successes = 0
			if failures++; failures >= threshold(rp.FailureThreshold, 3) {
				c.ready = false
			}
		}
		now := c.ready
		p.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if was != now {
			log.L.Infof("pod %s/%s container %s: ready=%v (probe error: %v)", r.pod.Namespace, r.pod.Name, c.spec.Name, now, err)
		}
		r.publish()
		if !sleepCtx(ctx, seconds(rp.PeriodSeconds, 10)) {
			return
		}
	}
}

// kill ends a container whose probe failed; supervise restarts it.
func (r *podRuntime) kill(c *containerRuntime, why string) {
	r.p.mu.Lock()
	pid := c.pid
	r.p.mu.Unlock()
	fmt.Fprintf(logWriter(c), "process-node: %s; killing the container\n", why)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// check runs one probe. A nil error is success.
func (r *podRuntime) check(ctx context.Context, c *containerRuntime, pr *corev1.Probe) error {
	timeout := seconds(pr.TimeoutSeconds, 1)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.p.mu.Lock()
	pid, ip, env, image, ports := c.pid, r.net.ip.String(), c.env, c.image, c.spec.Ports
	uid, gid, _ := identity(r.pod, &c.spec)
	r.p.mu.Unlock()
	switch {
	case pr.Exec != nil:
		if len(pr.Exec.Command) == 0 {
			return fmt.Errorf("empty exec probe")
		}
		prog, err := resolveBinary(image, c.spec.Image, pr.Exec.Command[0])
		if err != nil {
			return err
		}
		return inContainer(ctx, pid, uid, gid, env, prog, pr.Exec.Command[1:]).Run()
	case pr.TCPSocket != nil:
		port, err := resolvePort(pr.TCPSocket.Port, ports)
		if err != nil {
			return err
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	case pr.HTTPGet != nil:
		port, err := resolvePort(pr.HTTPGet.Port, ports)
		if err != nil {
			return err
		}
		host := ip
		if pr.HTTPGet.Host != "" {
			host = pr.HTTPGet.Host
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s%s", net.JoinHostPort(host, strconv.Itoa(port)), pr.HTTPGet.Path), nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	}
	return fmt.Errorf("probe kind not supported by the process-backed node")
}

// inContainer is a command that runs in a container's network and mount
// namespaces, with its environment and as its user (exec probes, kubectl
// exec).
func inContainer(ctx context.Context, pid int, uid, gid *int64, env []string, prog string, args []string) *exec.Cmd {
	ns := []string{"-t", strconv.Itoa(pid), "-n", "-m"}
	if gid != nil {
		ns = append(ns, "-G", strconv.FormatInt(*gid, 10))
	}
	if uid != nil {
		ns = append(ns, "-S", strconv.FormatInt(*uid, 10))
	}
	cmd := exec.CommandContext(ctx, "nsenter", append(append(ns, "--", prog), args...)...)
	cmd.Env = env
	return cmd
}

func resolvePort(p intstr.IntOrString, ports []corev1.ContainerPort) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("no container port named %q", p.StrVal)
}

func seconds(v, def int32) time.Duration {
	if v <= 0 {
		v = def
	}
	return time.Duration(v) * time.Second
}

func threshold(v, def int32) int32 {
	if v <= 0 {
		return def
	}
	return v
}
