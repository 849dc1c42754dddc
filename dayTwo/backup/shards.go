package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
)

// A sharded cluster's backup is a folder, <prefix><namespace>/<cluster>/<backup>/,
// holding one dump per shard (shard-<i>.rdb, each with its metadata next to
// it, as any dump) and manifest.json, written last: the folder is a
// complete backup only once the manifest is there.

// ShardedFolder is where a sharded cluster's backup is stored.
func ShardedFolder(prefix, namespace, cluster, backup string) string {
	return prefix + path.Join(namespace, cluster, backup) + "/"
}

// ShardFile is the name of shard i's dump in its backup's folder.
func ShardFile(i int) string { return "shard-" + strconv.Itoa(i) + ".rdb" }

// ManifestKey is the key of a sharded backup's manifest.
func ManifestKey(folder string) string { return folder + "manifest.json" }

// Manifest lists the dumps of a sharded cluster's backup and the slots
// each shard served when it was taken.
type Manifest struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Backup    string `json:"backup"`
	// Shards, by index from 0.
	Shards    []ShardManifest `json:"shards"`
	StartTime time.Time       `json:"startTime"`
	EndTime   time.Time       `json:"endTime"`
}

// ShardManifest is one shard of a sharded backup.
type ShardManifest struct {
	Index int `json:"index"`
	// Slots are the slot ranges the shard served ("0-5461", "5462").
	Slots []string `json:"slots"`
	// File is the dump's name in the backup's folder, so a folder copied
	// under another prefix restores as well.
	File              string    `json:"file"`
	SourcePod         string    `json:"sourcePod"`
	RedisVersion      string    `json:"redisVersion"`
	RDBVersion        int       `json:"rdbVersion"`
	ReplicationOffset int64     `json:"replicationOffset"`
	DB                int64     `json:"db"`
	Keys              int64     `json:"keys"`
	ExpiringKeys      int64     `json:"expiringKeys"`
	Size              int64     `json:"size"`
	Checksum          string    `json:"checksum"`
	StartTime         time.Time `json:"startTime"`
	EndTime           time.Time `json:"endTime"`
}

// ShardEntry is the manifest's entry of a shard's dump whose metadata is md.
func (md Metadata) ShardEntry(index int, slots []string) ShardManifest {
	return ShardManifest{Index: index, Slots: slots, File: ShardFile(index), SourcePod: md.SourcePod,
		RedisVersion: md.RedisVersion, RDBVersion: md.RDBVersion, ReplicationOffset: md.ReplicationOffset, DB: md.DB,
		Keys: md.Keys, ExpiringKeys: md.ExpiringKeys, Size: md.Size, Checksum: md.Checksum, StartTime: md.StartTime, EndTime: md.EndTime}
}

// Check says what is wrong with a manifest read from a store: shards
// numbered 0 to n-1 in order, each with a dump in the folder.
func (m Manifest) Check() error {
	if len(m.Shards) == 0 {
		return errors.New("the manifest lists no shard")
	}
	for i, sh := range m.Shards {
		if sh.Index != i {
			return fmt.Errorf("the manifest lists shard %d at position %d", sh.Index, i)
		}
		if sh.File == "" || strings.Contains(sh.File, "/") || strings.HasPrefix(sh.File, ".") {
			return fmt.Errorf("the manifest names %q as shard %d's dump, which is not a file of its folder", sh.File, i)
		}
	}
	return nil
}

// PutManifest stores a sharded backup's manifest, last, and returns its
// size and checksum.
func (s *Store) PutManifest(ctx context.Context, folder string, m Manifest) (int64, string, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return 0, "", err
	}
	sum := sha256.Sum256(b)
	if err := s.Put(ctx, ManifestKey(folder), bytes.NewReader(b), int64(len(b))); err != nil {
		return 0, "", err
	}
	return int64(len(b)), "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Manifest reads and checks a sharded backup's manifest.
func (s *Store) Manifest(ctx context.Context, folder string) (Manifest, error) {
	var m Manifest
	key := ManifestKey(folder)
	obj, err := s.o.get(ctx, key)
	if err != nil {
		return m, fmt.Errorf("reading %s: %w", s.o.where(key), err)
	}
	defer obj.Close()
	if err := json.NewDecoder(io.LimitReader(obj, 16<<20)).Decode(&m); err != nil {
		return m, fmt.Errorf("reading %s: %w", s.o.where(key), err)
	}
	if err := m.Check(); err != nil {
		return m, fmt.Errorf("%s: %w", s.o.where(key), err)
	}
	return m, nil
}

// DeleteSharded removes a sharded backup: its manifest first (what is
// left is then no complete backup), then each shard's dump and metadata.
// files are the dumps' names; a missing object is no error.
func (s *Store) DeleteSharded(ctx context.Context, folder string, files []string) error {
	if err := s.o.remove(ctx, ManifestKey(folder)); err != nil {
		return fmt.Errorf("removing %s: %w", s.o.where(ManifestKey(folder)), err)
	}
	for _, f := range files {
		if err := s.Delete(ctx, folder+f); err != nil {
			return err
		}
	}
	return nil
}

// RestoreShardInto restores shard's dump of the sharded backup in folder
// into dataDir, as RestoreInto does one dump: a data directory that holds
// data already is left alone, and the dump's size and checksum are checked
// against its metadata. The backup must have shards shards: a dump restored
// into another layout would serve keys from slots its node does not own.
func RestoreShardInto(ctx context.Context, s *Store, folder string, shard, shards int, dataDir string, logf func(string, ...any)) (Metadata, error) {
	if done, err := prepareDataDir(dataDir, folder, "", logf); done || err != nil {
		return Metadata{}, err
	}
	m, err := s.Manifest(ctx, folder)
	if err != nil {
		return Metadata{}, err
	}
	if err := ShardCountMatches(len(m.Shards), shards); err != nil {
		return Metadata{}, fmt.Errorf("%s: %w", s.Where(folder), err)
	}
	if shard < 0 || shard >= len(m.Shards) {
		return Metadata{}, fmt.Errorf("%s has no shard %d", s.Where(folder), shard)
	}
	logf("shard %d of %d: restoring %s (slots %s)", shard, shards, m.Shards[shard].File, strings.Join(m.Shards[shard].Slots, ","))
	return RestoreInto(ctx, s, folder+m.Shards[shard].File, dataDir, "", logf)
}

// ShardCountMatches says what to do when a sharded backup of have shards
// is restored into a cluster of want shards.
func ShardCountMatches(have, want int) error {
	if have == want {
		return nil
	}
	return fmt.Errorf("the backup holds %d shards and the cluster has %d: a sharded backup restores only into the same shard count; restore it into a cluster with spec.shards: %d, then change spec.shards to %d (resharding moves the slots)", have, want, have, want)
}
