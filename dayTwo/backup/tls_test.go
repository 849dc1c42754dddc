package backup

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cacheops/cacheops/dayTwo/access"
	"github.com/cacheops/cacheops/renderer/certificates"
)

// tlsServerArgs makes a CA and a server certificate for redis.test and
// returns the redis-server arguments that add a TLS listener on a free
// port (beside the plaintext one, so one server's data is streamed both
// ways), its address, the CA file and the client side of TLS that checks
// the certificate.
func tlsServerArgs(t testing.TB) (args []string, addr, caFile string, cfg *tls.Config) {
	t.Helper()
	now := time.Now()
	ca, err := certificates.NewCA(now, "test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := certificates.Issue(now, ca, "redis.test", []string{"redis.test"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"ca.crt": ca.Cert, "tls.crt": leaf.Cert, "tls.key": leaf.Key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg, err = access.ClientTLS(ca.Cert, "redis.test")
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(dir, "ca.crt")
	return []string{"--tls-port", fmt.Sprint(port), "--tls-cert-file", filepath.Join(dir, "tls.crt"), "--tls-key-file", filepath.Join(dir, "tls.key"),
		"--tls-ca-cert-file", caFile, "--tls-auth-clients", "no"}, fmt.Sprintf("127.0.0.1:%d", port), caFile, cfg
}

// The backup stream over TLS: the same dump as in plaintext, and a server
// whose certificate does not match the name is refused before AUTH.
func TestTakeOverTLS(t *testing.T) {
	ctx := context.Background()
	args, addr, _, cfg := tlsServerArgs(t)
	rc := redisServer(t, args...)
	for i := range 500 {
		if err := rc.Set(ctx, fmt.Sprintf("key:%d", i), "value", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	discard := func(_ context.Context, r io.Reader, _ int64) error { _, err := io.Copy(io.Discard, r); return err }
	plain, err := Take(ctx, Source{Addr: rc.Options().Addr, Access: access.Config{Password: "pw"}}, discard)
	if err != nil {
		t.Fatal(err)
	}
	overTLS, err := Take(ctx, Source{Addr: addr, Access: access.Config{Password: "pw", TLS: cfg}}, discard)
	if err != nil {
		t.Fatal(err)
	}
	if overTLS.Header.Keys != 500 || overTLS.Header.Keys != plain.Header.Keys {
		t.Fatalf("over TLS %d keys, in plaintext %d, want 500", overTLS.Header.Keys, plain.Header.Keys)
	}
	st, err := ReadSaveState(ctx, addr, access.Config{Password: "pw", TLS: cfg}, time.Second)
	if err != nil || st.Saving {
		t.Fatalf("INFO persistence over TLS: %+v, %v", st, err)
	}
	wrong := cfg.Clone()
	wrong.ServerName = "other.test"
	if _, err := Take(ctx, Source{Addr: addr, Access: access.Config{Password: "pw", TLS: wrong}, Timeout: 2 * time.Second}, discard); err == nil {
		t.Fatal("a certificate for another name was accepted")
	}
	if _, err := Take(ctx, Source{Addr: addr, Access: access.Config{Password: "pw"}, Timeout: 2 * time.Second}, discard); err == nil {
		t.Fatal("a plaintext SYNC on the TLS port succeeded")
	}
}
