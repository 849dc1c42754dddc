package controller

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// A sharded manifest a person might get wrong, and the message they get.
func TestAdmissionRejectsInvalidShardedClusters(t *testing.T) {
	ns := newNamespace(t)
	tests := []struct {
		name    string
		spec    string
		wantErr string
	}{
		{"unknown mode", "version: '7.0.15'\nmode: cluster", `spec.mode: Unsupported value: "cluster"`},
		{"sharded without shards", "version: '7.0.15'\nmode: sharded", `a sharded cluster needs spec.shards`},
		{"two shards", "version: '7.0.15'\nmode: sharded\nshards: 2", `spec.shards in body should be greater than or equal to 3`},
		{"shards in replication mode", "version: '7.0.15'\nshards: 3", `spec.shards and spec.replicasPerShard apply only to mode: sharded`},
		{"replicasPerShard in replication mode", "version: '7.0.15'\nreplicasPerShard: 2", `spec.shards and spec.replicasPerShard apply only to mode: sharded`},
		{"replicas and shards", "version: '7.0.15'\nmode: sharded\nshards: 3\nreplicas: 6", `spec.replicas and spec.shards cannot be set together`},
		{"negative replicasPerShard", "version: '7.0.15'\nmode: sharded\nshards: 3\nreplicasPerShard: -1", `spec.replicasPerShard in body should be greater than or equal to 0`},
		{"too many replicasPerShard", "version: '7.0.15'\nmode: sharded\nshards: 3\nreplicasPerShard: 6", `spec.replicasPerShard in body should be less than or equal to 5`},
		{"automatic restore", "version: '7.0.15'\nmode: sharded\nshards: 3\nbackup: {autoRestore: true, pvc: {claimName: b}}", `backup.autoRestore (disaster recovery in place) is not supported for a sharded cluster: restore a backup into a new sharded CacheCluster with spec.restore instead`},
		{"a replication cluster's dump", "version: '7.0.15'\nmode: sharded\nshards: 3\nrestore: {key: ns/c/c-1.rdb, pvc: {claimName: b}}", `a sharded cluster restores a sharded cluster's backup: restore.key names the backup's folder and ends in /`},
		{"a sharded backup in replication mode", "version: '7.0.15'\nrestore: {key: ns/c/c-1/, pvc: {claimName: b}}", `restore.key ends in /, so it names a sharded cluster's backup`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(context.Background(), unstructuredCC(g, ns, "bad", tt.spec))
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tt.wantErr))
		})
	}
}

// A sharded cluster backs up on a schedule and restores a sharded
// backup, by name or by its folder.
func TestAdmissionAdmitsShardedBackupsAndRestores(t *testing.T) {
	ns := newNamespace(t)
	for i, spec := range []string{
		"version: '7.0.15'\nmode: sharded\nshards: 3\npaused: true\nbackup: {enabled: true, schedule: '@daily', pvc: {claimName: b}, retention: {count: 3}}",
		"version: '7.0.15'\nmode: sharded\nshards: 3\npaused: true\nrestore: {backup: b}",
		"version: '7.0.15'\nmode: sharded\nshards: 3\npaused: true\nrestore: {key: ns/c/c-1/, pvc: {claimName: b}}",
	} {
		g := NewWithT(t)
		g.Expect(k8s.Create(context.Background(), unstructuredCC(g, ns, fmt.Sprintf("ok-%d", i), spec))).To(Succeed(), spec)
	}
}

// A sharded cluster is admitted with its defaults, and what cannot change
// in place (the mode, the replicas per shard, a shard count below 3) is
// refused with a message that says what to do instead; the shard count
// itself may change (resharding).
func TestAdmissionKeepsShardLayoutImmutable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	sharded := loadExample(t, "sharded", ns)
	sharded.Spec.Paused = true
	sharded.Spec.ReplicasPerShard = nil
	g.Expect(k8s.Create(ctx, sharded)).To(Succeed())
	plain := loadExample(t, "basic", ns)
	plain.Spec.Paused = true
	g.Expect(k8s.Create(ctx, plain)).To(Succeed())
	g.Expect(getCC(g, plain).Spec.Mode).To(Equal(cachev1alpha1.ModeReplication))
	got := getCC(g, sharded)
	g.Expect(got.Spec.Mode).To(Equal(cachev1alpha1.ModeSharded))
	g.Expect(got.DesiredReplicas()).To(Equal(int32(6)), "3 shards × (1 master + 1 replica by default)")

	change := func(cc *cachev1alpha1.CacheCluster, mutate func(*cachev1alpha1.CacheCluster)) error {
		got := getCC(g, cc)
		patch := client.MergeFrom(got.DeepCopy())
		mutate(got)
		return k8s.Patch(ctx, got, patch)
	}
	g.Expect(change(plain, func(c *cachev1alpha1.CacheCluster) {
		c.Spec.Mode, c.Spec.Shards, c.Spec.Replicas = cachev1alpha1.ModeSharded, ptr.To[int32](3), nil
	})).To(MatchError(ContainSubstring("spec.mode is immutable: a cluster cannot move between replication and sharded")))
	// A change of spec.shards is resharding; the minimum of 3 holds.
	g.Expect(change(sharded, func(c *cachev1alpha1.CacheCluster) { c.Spec.Shards = ptr.To[int32](2) })).
		To(MatchError(ContainSubstring("should be greater than or equal to 3")))
	g.Expect(change(sharded, func(c *cachev1alpha1.CacheCluster) { c.Spec.Shards = ptr.To[int32](4) })).To(Succeed())
	g.Expect(change(sharded, func(c *cachev1alpha1.CacheCluster) { c.Spec.Shards = ptr.To[int32](3) })).To(Succeed())
	g.Expect(change(sharded, func(c *cachev1alpha1.CacheCluster) { c.Spec.ReplicasPerShard = ptr.To[int32](2) })).
		To(MatchError(ContainSubstring("spec.replicasPerShard cannot change yet")))
	// Writing down the default changes nothing, so it is allowed, as is
	// any other field.
	g.Expect(change(sharded, func(c *cachev1alpha1.CacheCluster) { c.Spec.ReplicasPerShard = ptr.To[int32](1) })).To(Succeed())
	g.Expect(change(sharded, func(c *cachev1alpha1.CacheCluster) {
		c.Spec.Engine, c.Spec.Version = cachev1alpha1.EngineValkey, "8.0.1"
	})).To(Succeed())
	// kubectl scale goes through spec.replicas, which a sharded cluster
	// does not use.
	g.Expect(change(sharded, func(c *cachev1alpha1.CacheCluster) { c.Spec.Replicas = ptr.To[int32](8) })).
		To(MatchError(ContainSubstring("spec.replicas and spec.shards cannot be set together")))
}
