package cluster

import (
	"os"
	"path/filepath"
	"testing"
)

// A volume written like the kubelet's atomic writer: the files are links
// through ..data, an update switches ..data at once and leaves the volume
// folder itself in place (a bind mount of it sees the new files), a file
// no longer in the source goes, and the same content writes nothing.
func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sum, err := writeAtomic(dir, map[string][]byte{"tls.crt": []byte("one"), "tls.key": []byte("k1"), "sub/x": []byte("x")}, 0o440, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := read("tls.crt"); got != "one" {
		t.Fatalf("tls.crt = %q", got)
	}
	if target, err := os.Readlink(filepath.Join(dir, "tls.crt")); err != nil || target != "..data/tls.crt" {
		t.Fatalf("tls.crt links to %q (%v), want ..data/tls.crt", target, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "tls.key")); err != nil || fi.Mode().Perm() != 0o440 {
		t.Fatalf("tls.key mode %v (%v), want 0440", fi.Mode().Perm(), err)
	}
	oldData, _ := os.Readlink(filepath.Join(dir, "..data"))

	again, err := writeAtomic(dir, map[string][]byte{"tls.crt": []byte("one"), "tls.key": []byte("k1"), "sub/x": []byte("x")}, 0o440, nil, sum)
	if err != nil || again != sum {
		t.Fatalf("same content: digest %s (%v), want %s", again, err, sum)
	}
	if data, _ := os.Readlink(filepath.Join(dir, "..data")); data != oldData {
		t.Fatalf("same content rewrote ..data: %s → %s", oldData, data)
	}

	if _, err := writeAtomic(dir, map[string][]byte{"tls.crt": []byte("two"), "tls.key": []byte("k2")}, 0o440, nil, sum); err != nil {
		t.Fatal(err)
	}
	if got := read("tls.crt") + read("tls.key"); got != "twok2" {
		t.Fatalf("after the update: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Fatalf("sub is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, oldData)); !os.IsNotExist(err) {
		t.Fatalf("the old content folder %s is still there: %v", oldData, err)
	}
	after, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Fatal("the volume folder was replaced: a bind mount of it would keep the old files")
	}
}
