package main

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// A completed backup is described in one line; a sharded cluster's with
// a line per shard: its slots, keys, size, source and dump.
func TestWriteCompleted(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	writeCompleted(&out, &cachev1alpha1.CacheBackup{Status: cachev1alpha1.CacheBackupStatus{
		Keys: 3, Size: 100, Checksum: "sha256:aa",
		Location: &cachev1alpha1.BackupLocation{S3: &cachev1alpha1.S3Target{Bucket: "b"}, Key: "p/ns/basic/basic-1.rdb"},
	}})
	g.Expect(out.String()).To(Equal("completed: 3 keys, 100 bytes, s3://b/p/ns/basic/basic-1.rdb (sha256:aa)\n"))

	out.Reset()
	writeCompleted(&out, &cachev1alpha1.CacheBackup{Status: cachev1alpha1.CacheBackupStatus{
		Keys: 30, Size: 300, Checksum: "sha256:mm", Message: "2 shards; their snapshots were asked for within 3ms of each other",
		Location: &cachev1alpha1.BackupLocation{S3: &cachev1alpha1.S3Target{Bucket: "b"}, Key: "p/ns/carts/carts-1/"},
		Shards: []cachev1alpha1.ShardBackup{
			{Index: 0, Slots: []string{"0-8191"}, Keys: 10, Size: 100, SourcePod: "carts-1", Key: "p/ns/carts/carts-1/shard-0.rdb", Checksum: "sha256:00"},
			{Index: 1, Slots: []string{"8192-16383"}, Keys: 20, Size: 200, SourcePod: "carts-3", Key: "p/ns/carts/carts-1/shard-1.rdb", Checksum: "sha256:11"},
		},
	}})
	g.Expect(out.String()).To(Equal(`completed: 2 shards, 30 keys, 300 bytes, s3://b/p/ns/carts/carts-1/ (manifest sha256:mm)
  shard 0, slots 0-8191: 10 keys, 100 bytes from carts-1, shard-0.rdb (sha256:00)
  shard 1, slots 8192-16383: 20 keys, 200 bytes from carts-3, shard-1.rdb (sha256:11)
  2 shards; their snapshots were asked for within 3ms of each other
`))
}
