package cluster

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// In-cluster API access. A kubelet gives every container
// KUBERNETES_SERVICE_HOST/PORT (the `kubernetes` Service) and, for pods
// that mount a service account token, the token, the cluster CA and the
// namespace under /var/run/secrets/kubernetes.io/serviceaccount. Here
// there is no kube-proxy and kube-apiserver listens on the host's
// loopback, so each pod gets a forwarder at 127.0.0.1:<port> inside its
// own network namespace to the API server's port on the host: the API
// server's certificate (issued for 127.0.0.1) checks out, and in-cluster
// clients such as the operator's manager work unchanged.

// serviceAccountDir is where pods find their token.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// apiAccess is what pods need to reach the API server.
type apiAccess struct {
	host, port string // the API server on the host's loopback
	ca         []byte
}

func newAPIAccess(server string, ca []byte) (*apiAccess, error) {
	u, err := url.Parse(server)
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return nil, err
	}
	return &apiAccess{host: host, port: port, ca: ca}, nil
}

// forward listens on 127.0.0.1:<port> in the network namespace at nsPath
// and copies each connection to the API server, until ctx ends.
func (a *apiAccess) forward(ctx context.Context, nsPath string) error {
	l, err := listenInNetNS(nsPath, net.JoinHostPort("127.0.0.1", a.port))
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	go func() {
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer in.Close()
				out, err := net.DialTimeout("tcp", net.JoinHostPort(a.host, a.port), 5*time.Second)
				if err != nil {
					return
				}
				defer out.Close()
				stop := context.AfterFunc(ctx, func() { in.Close(); out.Close() })
				defer stop()
				done := make(chan struct{})
				go func() { _, _ = io.Copy(out, in); _ = out.(*net.TCPConn).CloseWrite(); close(done) }()
				_, _ = io.Copy(in, out)
				<-done
			}()
		}
	}()
	return nil
}

// listenInNetNS opens a listening socket inside another network
// namespace. The socket stays there; accepting works from any thread.
func listenInNetNS(nsPath, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// A thread whose namespace cannot be restored is not unlocked:
		// Go ends it with the goroutine instead of reusing it.
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer self.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("entering %s: %w", nsPath, err)}
			return
		}
		l, lerr := net.Listen("tcp", addr)
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			if l != nil {
				l.Close()
			}
			ch <- result{err: fmt.Errorf("leaving %s: %w", nsPath, err)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{l: l, err: lerr}
	}()
	r := <-ch
	return r.l, r.err
}

// env is what a kubelet sets in every container for the API server.
func (a *apiAccess) env() map[string]string {
	return map[string]string{
		"KUBERNETES_SERVICE_HOST": "127.0.0.1",
		"KUBERNETES_SERVICE_PORT": a.port,
		"KUBERNETES_PORT":         "tcp://127.0.0.1:" + a.port,
	}
}

// mountsToken tells whether a pod gets a service account token, as the
// ServiceAccount admission plugin decides: unless the pod or its account
// opts out, or a container mounts something there itself.
func mountsToken(pod *corev1.Pod) bool {
	if pod.Spec.AutomountServiceAccountToken != nil && !*pod.Spec.AutomountServiceAccountToken {
		return false
	}
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.MountPath == serviceAccountDir {
				return false
			}
		}
	}
	return true
}

// writeToken requests a token for the pod's service account, bound to the
// pod, and writes token, ca.crt and namespace into dir.
func (p *provider) writeToken(ctx context.Context, pod *corev1.Pod, dir string) error {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := p.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](24 * 3600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return errConfig{fmt.Sprintf("service account token for %s: %v", sa, err)}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": p.api.ca, "namespace": []byte(pod.Namespace)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// withDefaults adds NAME=value entries for the names env does not set.
func withDefaults(env []string, defaults map[string]string) []string {
	out := append([]string(nil), env...)
	names := slices.Sorted(maps.Keys(defaults))
	for _, name := range names {
		if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") }) {
			out = append(out, name+"="+defaults[name])
		}
	}
	return out
}
