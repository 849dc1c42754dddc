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
	has := func(name string) bool {
		_, err := os.Stat(filepath.Join(dataDir, name))
		return err == nil
	}
	if replace != "" {
		marker, _ := os.ReadFile(filepath.Join(dataDir, RestoredMarker))
		if lines := strings.Split(string(marker), "\n"); len(lines) > 2 && lines[2] == replace {
			logf("%s was restored by recovery %s already; nothing to do", dataDir, replace)
			return Metadata{}, nil
		}
		logf("recovery %s: replacing what %s holds with %s", replace, dataDir, key)
		for _, name := range []string{RestoredMarker, "appendonly", "appendonlydir", "dump.rdb", "appendonly.aof"} {
			if err := os.RemoveAll(filepath.Join(dataDir, name)); err != nil {
				return Metadata{}, err
			}
		}
	}
	switch {
	case has(RestoredMarker):
		logf("%s was restored already; nothing to do", dataDir)
		return Metadata{}, nil
	case has("appendonly"), has("dump.rdb") && !has("appendonly.aof"):
		// Redis ran here (its AOF folder, or an RDB it wrote itself).
		logf("%s holds data already; nothing to restore", dataDir)
		return Metadata{}, nil
	}
	leftovers, _ := filepath.Glob(filepath.Join(dataDir, ".restore-*"))
	for _, partial := range append(leftovers, filepath.Join(dataDir, "dump.rdb"), filepath.Join(dataDir, "appendonly.aof")) {
		if err := os.Remove(partial); err != nil && !errors.Is(err, os.ErrNotExist) {
			return Metadata{}, err
		}
	}
	meta, err := s.Metadata(ctx, key)
	if err != nil {
		return meta, err
	}
	obj, err := s.Get(ctx, key)
	if err != nil {
		return meta, err
	}
	defer obj.Close()
	tmp, err := os.CreateTemp(dataDir, ".restore-*")
	if err != nil {
		return meta, err
	}
	defer os.Remove(tmp.Name())
	hash := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, hash), obj)
	if err != nil {
		tmp.Close()
		return meta, fmt.Errorf("downloading %s: %w", key, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return meta, err
	}
	if err := tmp.Close(); err != nil {
		return meta, err
	}
	sum := "sha256:" + hex.EncodeToString(hash.Sum(nil))
	if n != meta.Size {
		return meta, fmt.Errorf("%s: downloaded %d bytes, the metadata says %d", key, n, meta.Size)
	}
	if sum != meta.Checksum {
		return meta, fmt.Errorf("%s: checksum %s, the metadata says %s", key, sum, meta.Checksum)
	}
	// appendonly.aof first, dump.rdb second, the marker last: a restore
	// cut anywhere in between is recognised and done again.
	if err := os.Link(tmp.Name(), filepath.Join(dataDir, "appendonly.aof")); err != nil {
		return meta, err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dataDir, "dump.rdb")); err != nil {
		return meta, err
	}
	if err := os.WriteFile(filepath.Join(dataDir, RestoredMarker), []byte(key+"\n"+sum+"\n"+replace+"\n"), 0o644); err != nil {
		return meta, err
	}
	if d, err := os.Open(dataDir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return meta, err
		}
	}
	logf("restored %s (%d bytes, %s, %d keys from Redis %s) into %s", key, n, sum, meta.Keys, meta.RedisVersion, dataDir)
	return meta, nil
}
