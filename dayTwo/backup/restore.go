package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// RestoredMarker is written into the data directory after a restore.
const RestoredMarker = ".cacheops-restored"

// RestoreInto downloads the dump at key into dataDir, where redis-server
// loads it at start: dump.rdb, and appendonly.aof (the same file) for a
// server with appendonly on, which reads an AOF that is an RDB preamble and
// moves it into its AOF folder. A data directory that holds data already
// is left alone, so a restarted pod keeps what it has; what an interrupted
// restore left is removed and the restore done again. The checksum and size
// are checked against the metadata before the file is put in place, and
// the marker is written last.
//
// replace, when set, is the id of a disaster recovery: the operator found
// that the cluster lost its data, so what the folder holds (an empty
// dataset Redis wrote since) is replaced, once per recovery; the marker
// records the id.
func RestoreInto(ctx context.Context, s *Store, key, dataDir, replace string, logf func(string, ...any)) (Metadata, error) {
	if done, err := prepareDataDir(dataDir, key, replace, logf); done || err != nil {
		return Metadata{}, err
	}
	meta, err := s.Metadata(ctx, key)
	if err != nil {
		return meta, err
	}
	tmp, n, sum, err := download(ctx, s, key, dataDir)
	if tmp != "" {
		defer os.Remove(tmp)
	}
	if err != nil {
		return meta, err
	}
	if n != meta.Size {
		return meta, fmt.Errorf("%s: downloaded %d bytes, the metadata says %d", key, n, meta.Size)
	}
	if sum != meta.Checksum {
		return meta, fmt.Errorf("%s: checksum %s, the metadata says %s", key, sum, meta.Checksum)
	}
	if err := install(tmp, dataDir, key+"\n"+sum+"\n"+replace+"\n"); err != nil {
		return meta, err
	}
	logf("restored %s (%d bytes, %s, %d keys from Redis %s) into %s", key, n, sum, meta.Keys, meta.RedisVersion, dataDir)
	return meta, nil
}

// prepareDataDir empties the data folder for a recovery that replaces
// what it holds, and tells whether there is nothing to restore (restored
// already, or Redis ran here); otherwise it removes what a restore cut
// short left behind.
func prepareDataDir(dataDir, key, replace string, logf func(string, ...any)) (bool, error) {
	has := func(name string) bool {
		_, err := os.Stat(filepath.Join(dataDir, name))
		return err == nil
	}
	if replace != "" {
		marker, _ := os.ReadFile(filepath.Join(dataDir, RestoredMarker))
		if lines := strings.Split(string(marker), "\n"); len(lines) > 2 && lines[2] == replace {
			logf("%s was restored by recovery %s already; nothing to do", dataDir, replace)
			return true, nil
		}
		logf("recovery %s: replacing what %s holds with %s", replace, dataDir, key)
		for _, name := range []string{RestoredMarker, "appendonly", "appendonlydir", "dump.rdb", "appendonly.aof"} {
			if err := os.RemoveAll(filepath.Join(dataDir, name)); err != nil {
				return false, err
			}
		}
	}
	switch {
	case has(RestoredMarker):
		logf("%s was restored already; nothing to do", dataDir)
		return true, nil
	case has("appendonly"), has("dump.rdb") && !has("appendonly.aof"):
		// Redis ran here (its AOF folder, or an RDB it wrote itself).
		logf("%s holds data already; nothing to restore", dataDir)
		return true, nil
	}
	leftovers, _ := filepath.Glob(filepath.Join(dataDir, ".restore-*"))
	for _, partial := range append(leftovers, filepath.Join(dataDir, "dump.rdb"), filepath.Join(dataDir, "appendonly.aof")) {
		if err := os.Remove(partial); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, err
		}
	}
	return false, nil
}

// download copies the dump into a temporary file of the data folder,
// synced, and returns its name, size and checksum.
func download(ctx context.Context, s *Store, key, dataDir string) (string, int64, string, error) {
	obj, err := s.Get(ctx, key)
	if err != nil {
		return "", 0, "", err
	}
	defer obj.Close()
	tmp, err := os.CreateTemp(dataDir, ".restore-*")
	if err != nil {
		return "", 0, "", err
	}
	hash := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, hash), obj)
	if err != nil {
		tmp.Close()
		return tmp.Name(), n, "", fmt.Errorf("downloading %s: %w", key, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return tmp.Name(), n, "", err
	}
	if err := tmp.Close(); err != nil {
		return tmp.Name(), n, "", err
	}
	return tmp.Name(), n, "sha256:" + hex.EncodeToString(hash.Sum(nil)), nil
}

// install puts the downloaded dump in place: appendonly.aof first,
// dump.rdb second, the marker last, so a restore cut anywhere in between
// is recognised and done again.
func install(tmp, dataDir, marker string) error {
	if err := os.Link(tmp, filepath.Join(dataDir, "appendonly.aof")); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dataDir, "dump.rdb")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dataDir, RestoredMarker), []byte(marker), 0o644); err != nil {
		return err
	}
	d, err := os.Open(dataDir)
	if err != nil {
		return nil
	}
	defer d.Close()
	return d.Sync()
}
