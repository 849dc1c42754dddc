package backup

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// storeServer serves a folder as a backup-store pod does and returns a
// client of it with the password "secret".
func storeServer(t *testing.T, dir string, access Access) *Store {
	t.Helper()
	srv := httptest.NewServer(Handler(NewDirStore(dir, "pvc://backups"), access, t.Logf))
	t.Cleanup(srv.Close)
	return NewRemoteStore(strings.TrimPrefix(srv.URL, "http://"), "secret", "backups")
}

// The operator's side of a claim target: a backup-store server over a
// folder, reached with the cluster's password.
func TestRemoteStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := storeServer(t, dir, Access{Token: "secret"})

	key := ObjectKey("e2e/", "ns", "cache", "cache-1")
	dump := bytes.Repeat([]byte("REDIS0011"), 100000)
	if err := s.Put(ctx, key, bytes.NewReader(dump), int64(len(dump))); err != nil {
		t.Fatal(err)
	}
	m := Metadata{Backup: "cache-1", Keys: 3, Size: int64(len(dump)), StartTime: time.Unix(0, 0).UTC(), EndTime: time.Unix(0, 0).UTC()}
	if err := s.PutMetadata(ctx, key, m); err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, "e2e", "ns", "cache", "cache-1.rdb"))
	if err != nil || !bytes.Equal(onDisk, dump) {
		t.Fatalf("the dump on the claim: %d bytes, %v", len(onDisk), err)
	}
	got, err := s.Metadata(ctx, key)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("metadata: %+v, %v", got, err)
	}
	r, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(back, dump) {
		t.Fatalf("read back %d bytes, %v", len(back), err)
	}

	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Fatalf("deleting what is gone is no error: %v", err)
	}
	_, err = s.Metadata(ctx, key)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "pvc://backups/e2e/ns/cache/cache-1.rdb.json") {
		t.Fatalf("a missing dump: %v", err)
	}
}

func TestRemoteStoreRefusesAWrongPasswordAndBadKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wrong := storeServer(t, dir, Access{Token: "other"})
	err := wrong.Put(ctx, "a.rdb", strings.NewReader("x"), 1)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a wrong password: %v", err)
	}
	s := storeServer(t, dir, Access{Token: "secret"})
	for _, key := range []string{"../outside.rdb", "a/../../outside.rdb", "a/.partial-1", ".hidden"} {
		if err := s.Put(ctx, key, strings.NewReader("x"), 1); err == nil {
			t.Errorf("key %q was accepted", key)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "outside.rdb")); err == nil {
		t.Fatal("a key wrote outside the folder")
	}

	// A cluster's store serves its own folder only; a restore's, read only.
	a := storeServer(t, dir, Access{Token: "secret", KeyPrefix: "ns/a/"})
	if err := a.Put(ctx, "ns/a/1.rdb", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, "ns/b/1.rdb", strings.NewReader("x"), 1); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("another cluster's folder: %v", err)
	}
	ro := storeServer(t, dir, Access{Token: "secret", KeyPrefix: "ns/a/", ReadOnly: true})
	if r, err := ro.Get(ctx, "ns/a/1.rdb"); err != nil {
		t.Fatal(err)
	} else {
		r.Close()
	}
	if err := ro.Delete(ctx, "ns/a/1.rdb"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a deletion through a read-only store: %v", err)
	}
}

// An upload cut short leaves no file that looks like a dump.
func TestInterruptedUploadLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	s := storeServer(t, dir, Access{Token: "secret"})

	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write(bytes.Repeat([]byte("x"), 1<<20))
		cancel() // the failover: the attempt is aborted mid-stream
		_ = pw.CloseWithError(context.Canceled)
	}()
	if err := s.Put(ctx, "ns/c/b.rdb", pr, 8<<20); err == nil {
		t.Fatal("an interrupted upload succeeded")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var files []string
		_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				files = append(files, p)
			}
			return nil
		})
		if len(files) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind: %v", files)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A restore from a claim checks the file against its metadata.
func TestRestoreFromAFolderRefusesACorruptedDump(t *testing.T) {
	ctx := context.Background()
	claim := t.TempDir()
	s := NewDirStore(claim, "pvc://backups")
	dump := []byte("REDIS0011 not really a dump")
	if err := s.Put(ctx, "b.rdb", bytes.NewReader(dump), int64(len(dump))); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMetadata(ctx, "b.rdb", Metadata{Size: int64(len(dump)), Checksum: "sha256:0000"}); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	_, err := RestoreInto(ctx, s, "b.rdb", data, "", t.Logf)
	if err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("a corrupted dump: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "dump.rdb")); err == nil {
		t.Fatal("the corrupted dump was put in place")
	}
}
