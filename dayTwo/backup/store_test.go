package backup

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cacheops/cacheops/dayTwo/access"
	"github.com/cacheops/cacheops/test/s3server"
)

// s3 starts a real S3 server (versitygw from bin/, built by make tools) with
// one bucket.
func s3(t testing.TB) *Store {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	srv, err := s3server.Start(filepath.Join(filepath.Dir(file), "..", "..", "bin"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	st, err := NewStore(Target{Endpoint: srv.Endpoint("127.0.0.1"), Bucket: "backups", AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestBackupAndRestoreThroughS3(t *testing.T) {
	ctx := context.Background()
	st := s3(t)
	rc := redisServer(t)
	for i := range 500 {
		rc.Set(ctx, fmt.Sprintf("k%d", i), i, 0)
	}
	key := ObjectKey("team/", "default", "cache", "cache-1")
	res, err := Take(ctx, Source{Addr: rc.Options().Addr, Access: access.Config{Password: "pw"}}, func(ctx context.Context, r io.Reader, size int64) error {
		return st.Put(ctx, key, r, size)
	})
	if err != nil {
		t.Fatal(err)
	}
	meta := Metadata{Keys: res.Header.Keys, Size: res.Size, Checksum: res.Checksum, RedisVersion: res.Header.RedisVersion}
	if err := st.PutMetadata(ctx, key, meta); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	got, err := RestoreInto(ctx, st, key, dir, "", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if got.Keys != 500 || got.Checksum != res.Checksum {
		t.Errorf("metadata %+v, want 500 keys and %s", got, res.Checksum)
	}
	for _, f := range []string{"dump.rdb", "appendonly.aof", RestoredMarker} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s after the restore: %v", f, err)
		}
	}
	// A second run (a restarted pod) keeps what the folder holds.
	if m, err := RestoreInto(ctx, st, key, dir, "", t.Logf); err != nil || m.Checksum != "" {
		t.Errorf("a second restore must leave the data alone: %+v, %v", m, err)
	}
	loaded := redisServer(t, "--dir", dir, "--appendonly", "yes", "--appenddirname", "appendonly")
	if n := loaded.DBSize(ctx).Val(); n != 500 {
		t.Errorf("restored server holds %d keys, want 500", n)
	}

	// A disaster recovery replaces what Redis wrote into a folder after
	// its data was lost, once per recovery.
	lost := t.TempDir()
	empty0 := redisServer(t, "--dir", lost, "--appendonly", "yes", "--appenddirname", "appendonly")
	_ = empty0.Shutdown(ctx).Err() // the reply is the connection closing
	for empty0.Ping(ctx).Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	if m, err := RestoreInto(ctx, st, key, lost, "", t.Logf); err != nil || m.Checksum != "" {
		t.Fatalf("without a recovery id a folder Redis wrote is kept: %+v, %v", m, err)
	}
	if m, err := RestoreInto(ctx, st, key, lost, "recovery-1", t.Logf); err != nil || m.Checksum != res.Checksum {
		t.Fatalf("recovery-1 must replace the folder's content: %+v, %v", m, err)
	}
	if m, err := RestoreInto(ctx, st, key, lost, "recovery-1", t.Logf); err != nil || m.Checksum != "" {
		t.Errorf("recovery-1 twice must restore once: %+v, %v", m, err)
	}
	if n := redisServer(t, "--dir", lost, "--appendonly", "yes", "--appenddirname", "appendonly").DBSize(ctx).Val(); n != 500 {
		t.Errorf("the recovered folder holds %d keys, want 500", n)
	}

	// A dump that does not match its metadata is refused, and nothing is
	// put in place.
	meta.Checksum = "sha256:0000"
	if err := st.PutMetadata(ctx, key, meta); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	if _, err := RestoreInto(ctx, st, key, empty, "", t.Logf); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("a checksum mismatch must fail the restore, got %v", err)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("a refused restore left %d files behind", len(entries))
	}

	if err := st.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Metadata(ctx, key); err == nil {
		t.Error("the metadata is still there after Delete")
	}
	if err := st.Delete(ctx, key); err != nil {
		t.Errorf("deleting what is gone: %v", err)
	}
}

// A restore cut between its steps is done again; a folder Redis wrote is
// left alone.
func TestRestoreIntoRecognisesWhatIsThere(t *testing.T) {
	ctx := context.Background()
	st := s3(t)
	rc := redisServer(t)
	rc.Set(ctx, "k", "v", 0)
	key := "x/dump.rdb"
	res, err := Take(ctx, Source{Addr: rc.Options().Addr, Access: access.Config{Password: "pw"}}, func(ctx context.Context, r io.Reader, size int64) error { return st.Put(ctx, key, r, size) })
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutMetadata(ctx, key, Metadata{Keys: 1, Size: res.Size, Checksum: res.Checksum}); err != nil {
		t.Fatal(err)
	}
	for name, files := range map[string][]string{
		"cut after the AOF link":      {"appendonly.aof"},
		"cut before the marker":       {"appendonly.aof", "dump.rdb"},
		"an empty folder":             nil,
		"leftover temporary download": {".restore-123"},
	} {
		dir := t.TempDir()
		for _, f := range files {
			os.WriteFile(filepath.Join(dir, f), []byte("partial"), 0o644)
		}
		m, err := RestoreInto(ctx, st, key, dir, "", t.Logf)
		if err != nil || m.Checksum != res.Checksum {
			t.Errorf("%s: restored %+v, %v; want a fresh restore", name, m, err)
		}
	}
	for name, files := range map[string][]string{
		"restored before":    {RestoredMarker},
		"Redis' AOF folder":  {"appendonly/"},
		"an RDB Redis wrote": {"dump.rdb"},
	} {
		dir := t.TempDir()
		for _, f := range files {
			if strings.HasSuffix(f, "/") {
				os.Mkdir(filepath.Join(dir, f), 0o755)
			} else {
				os.WriteFile(filepath.Join(dir, f), []byte("data"), 0o644)
			}
		}
		if m, err := RestoreInto(ctx, st, key, dir, "", t.Logf); err != nil || m.Checksum != "" {
			t.Errorf("%s: %+v, %v; want the folder left alone", name, m, err)
		}
	}
}

// A bucket behind HTTPS with a private CA: reached with the CA, refused
// without it.
func TestStoreWithACertificateAuthority(t *testing.T) {
	ctx := context.Background()
	certPEM, keyPEM := selfSigned(t)
	_, file, _, _ := runtime.Caller(0)
	srv, err := s3server.StartTLS(filepath.Join(filepath.Dir(file), "..", "..", "bin"), t.TempDir(), certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	target := Target{Endpoint: srv.Endpoint("127.0.0.1"), Bucket: "tls", AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey}

	untrusted, err := NewStore(target)
	if err != nil {
		t.Fatal(err)
	}
	if err := untrusted.EnsureBucket(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the CA the certificate must be refused, got %v", err)
	}
	target.CA = certPEM
	st, err := NewStore(target)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 1000)
	if err := st.Put(ctx, "k.rdb", strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(ctx, "k.rdb")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil || string(got) != body {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	if _, err := NewStore(Target{Endpoint: "x", Bucket: "b", CA: []byte("not a certificate")}); err == nil {
		t.Error("a CA Secret without a PEM certificate must be refused")
	}
}

// selfSigned makes a certificate for 127.0.0.1 that is its own CA.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "s3.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}
