// Package s3server runs a real S3 server (versitygw, built by `make tools`
// into bin/) on a local folder, for tests of backups.
package s3server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Server is a running versitygw.
type Server struct {
	// Port it listens on, on every address of this machine.
	Port            int
	AccessKeyID     string
	SecretAccessKey string
	// Dir holds the buckets (one folder each) and the server's log.
	Dir string
	cmd *exec.Cmd
}

// Start runs binDir/versitygw on a free port, serving folders of dir as
// buckets over plain HTTP, and waits until it accepts connections.
func Start(binDir, dir string) (*Server, error) { return start(binDir, dir, nil, nil) }

// StartTLS is Start serving HTTPS with the given PEM certificate and key.
func StartTLS(binDir, dir string, certPEM, keyPEM []byte) (*Server, error) {
	return start(binDir, dir, certPEM, keyPEM)
}

func start(binDir, dir string, certPEM, keyPEM []byte) (*Server, error) {
	bin := filepath.Join(binDir, "versitygw")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s is missing (make tools builds it): %w", bin, err)
	}
	root := filepath.Join(dir, "buckets")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{Port: port, AccessKeyID: "cacheops" + randHex(4), SecretAccessKey: randHex(20), Dir: dir}
	logf, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := []string{"--port", fmt.Sprintf(":%d", port)}
	if certPEM != nil {
		certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
			return nil, err
		}
		if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--cert", certFile, "--key", keyFile)
	}
	s.cmd = exec.Command(bin, append(args, "posix", root)...)
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKeyID, "ROOT_SECRET_KEY="+s.SecretAccessKey)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("versitygw did not listen on port %d within 30s (see %s)", port, logf.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Endpoint is host:port of the server as seen from address host (e.g. the
// pod network's gateway, for pods and the operator alike).
func (s *Server) Endpoint(host string) string {
	return net.JoinHostPort(host, fmt.Sprint(s.Port))
}

// Stop ends the server.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
