package access

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cacheops/cacheops/renderer"
	"github.com/cacheops/cacheops/renderer/certificates"
)

// The pre-check's seed is rendered with the environment FromEnv reads.
func TestSeedEnvironmentMatchesTheRenderer(t *testing.T) {
	if renderer.SeedTLSCAFileEnv != TLSCAFileEnv || renderer.SeedTLSServerNameEnv != TLSServerNameEnv {
		t.Fatalf("renderer sets %s and %s, FromEnv reads %s and %s", renderer.SeedTLSCAFileEnv, renderer.SeedTLSServerNameEnv, TLSCAFileEnv, TLSServerNameEnv)
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(PasswordEnv, "pw")
	t.Setenv(TLSCAFileEnv, "")
	c, err := FromEnv()
	if err != nil || c.Password != "pw" || c.TLS != nil {
		t.Fatalf("without a CA file: %+v, %v", c, err)
	}
	ca, err := certificates.NewCA(time.Now(), "t", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(file, ca.Cert, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(TLSCAFileEnv, file)
	t.Setenv(TLSServerNameEnv, "c.ns.svc")
	c, err = FromEnv()
	if err != nil || c.TLS == nil || c.TLS.ServerName != "c.ns.svc" || c.TLS.RootCAs == nil {
		t.Fatalf("with a CA file: %+v, %v", c.TLS, err)
	}
	t.Setenv(TLSServerNameEnv, "")
	if _, err := FromEnv(); err == nil {
		t.Fatal("a CA file without a server name must fail")
	}
	t.Setenv(TLSCAFileEnv, filepath.Join(t.TempDir(), "missing"))
	t.Setenv(TLSServerNameEnv, "c.ns.svc")
	if _, err := FromEnv(); err == nil {
		t.Fatal("a missing CA file must fail")
	}
}

func TestAuthCommands(t *testing.T) {
	for _, tt := range []struct {
		c             Config
		auth, migrate []string
	}{
		{Config{}, nil, nil},
		{Config{Password: "pw"}, []string{"AUTH", "pw"}, []string{"AUTH", "pw"}},
		{Config{Username: "op", Password: "pw"}, []string{"AUTH", "op", "pw"}, []string{"AUTH2", "op", "pw"}},
	} {
		if got := tt.c.AuthCommand(); !slices.Equal(got, tt.auth) {
			t.Errorf("%+v: AuthCommand %v, want %v", tt.c, got, tt.auth)
		}
		if got := tt.c.MigrateAuth(); !slices.Equal(got, tt.migrate) {
			t.Errorf("%+v: MigrateAuth %v, want %v", tt.c, got, tt.migrate)
		}
	}
}
