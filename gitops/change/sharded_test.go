package change

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const shardedCluster = `apiVersion: cache.cacheops.io/v1alpha1
kind: CacheCluster
metadata:
  name: carts
  namespace: prod
spec:
  version: "7.0.15"
  mode: sharded
  shards: 3
`

// `kubectl cache plan` of a sharded cluster says what day-two does with
// it, never a replication-mode plan: a new cluster is formed, a changed
// layout is refused at admission, a change of what the pods run restarts
// every shard's replicas first, then each master after its switchover.
func TestPredictShardedClusters(t *testing.T) {
	dir := t.TempDir()
	empty := writeFile(t, dir, "empty.yaml", "")
	base := writeFile(t, dir, "base.yaml", shardedCluster)
	plain := writeFile(t, dir, "plain.yaml", baseCluster)
	tests := []struct {
		name, base, head string
		check            func(Gomega, ClusterPlan)
	}{
		{
			name: "created", base: empty, head: shardedCluster,
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Operations).To(HaveLen(1))
				g.Expect(p.Operations[0].Description).To(HavePrefix("a new sharded cluster of 3 shards × 2 pods (6 pods), version 7.0.15"))
			},
		},
		{
			name: "more shards", base: base, head: strings.Replace(shardedCluster, "shards: 3", "shards: 4", 1),
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Rejected).To(BeEmpty())
				g.Expect(p.Operations).To(HaveLen(1))
				g.Expect(p.Operations[0].Type).To(Equal("Scaling"))
				g.Expect(p.Operations[0].Description).To(HavePrefix("spec.shards 3 → 4: 8193 of 16384 slots move (about 50% of the keys); shard 0 → 1: 4096-5461; shard 1 → 2: 8192-10922; shard 2 → 3: 12288-16383; pods added: carts-6 to carts-7"))
				g.Expect(p.Operations[0].Restarts).To(BeEmpty())
			},
		},
		{
			name: "fewer shards", base: writeFile(t, dir, "four.yaml", strings.Replace(shardedCluster, "shards: 3", "shards: 4", 1)), head: shardedCluster,
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Operations).To(HaveLen(1))
				g.Expect(p.Operations[0].Description).To(And(
					HavePrefix("spec.shards 4 → 3: 8193 of 16384 slots move (about 50% of the keys); shard 3 → 2: 12288-16383; shard 1 → 0"),
					HaveSuffix("pods removed once their shards serve no slot and are forgotten: carts-6 to carts-7")))
			},
		},
		{
			name: "more replicas per shard", base: base, head: shardedCluster + "  replicasPerShard: 2\n",
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Rejected).To(ConsistOf(ContainSubstring("replicasPerShard 1→2: rejected at admission")))
			},
		},
		{
			name: "replication to sharded", base: plain, head: strings.Replace(baseCluster, "replicas: 5", "mode: sharded\n  shards: 3", 1),
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Rejected).To(ConsistOf(ContainSubstring("mode: rejected at admission, it is immutable")))
			},
		},
		{
			name: "a migration to valkey restarts the replicas first, then each shard's master after its switchover", base: base, head: strings.Replace(shardedCluster, `version: "7.0.15"`, `version: "8.0.1"
  engine: valkey`, 1),
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Operations).To(HaveLen(1))
				g.Expect(p.Operations[0].Type).To(Equal("Upgrade"))
				g.Expect(p.Operations[0].Description).To(ContainSubstring("no rollback after the switchover"))
				g.Expect(p.Operations[0].Restarts).To(Equal([]string{"carts-5", "carts-3", "carts-1", "carts-0", "carts-2", "carts-4"}))
				g.Expect(p.Operations[0].Switchovers).To(Equal([]string{"carts-0→carts-1", "carts-2→carts-3", "carts-4→carts-5"}))
			},
		},
		{
			name: "a live parameter is set on every node, nothing restarts", base: base, head: shardedCluster + "  config:\n    maxmemory-policy: allkeys-lru\n",
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Operations).To(HaveLen(1))
				g.Expect(p.Operations[0].Type).To(Equal("Reconfigure"))
				g.Expect(p.Operations[0].Restarts).To(BeEmpty())
			},
		},
		{
			name: "automatic failover turned off is set live on every node", base: base, head: shardedCluster + "  highAvailability:\n    autoFailover: false\n",
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Operations).To(HaveLen(1))
				g.Expect(p.Operations[0].Type).To(Equal("Reconfigure"))
				g.Expect(p.Operations[0].Description).To(Equal("cluster-replica-no-failover no→yes (spec.highAvailability): applied live, no restart"))
				g.Expect(p.Operations[0].Restarts).To(BeEmpty())
			},
		},
		{
			name: "a shorter probe timeout changes the pods' probes: they restart and read the new cluster-node-timeout", base: base, head: shardedCluster + "  highAvailability:\n    probeTimeoutSeconds: 2\n",
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Operations).To(HaveLen(1))
				g.Expect(p.Operations[0].Type).To(Equal("Upgrade"))
				g.Expect(p.Operations[0].Restarts).To(HaveLen(6))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			head := writeFile(t, t.TempDir(), "head.yaml", tt.head)
			plans := predictFiles(g, tt.base, head, "")
			g.Expect(plans).To(HaveLen(1))
			tt.check(g, plans[0])
		})
	}
}

// `kubectl cache plan` of a sharded cluster's backups and restores: what
// one backup is, what a restore does, and what admission refuses.
func TestPredictShardedBackupsAndRestores(t *testing.T) {
	dir := t.TempDir()
	empty := writeFile(t, dir, "empty.yaml", "")
	base := writeFile(t, dir, "base.yaml", shardedCluster)
	s3 := "    s3: {endpoint: s3.example.com, bucket: backups, prefix: prod/, credentialsSecret: s3}\n"
	tests := []struct {
		name, base, head string
		check            func(Gomega, ClusterPlan)
	}{
		{
			name: "scheduled backups turned on", base: base,
			head: shardedCluster + "  backup:\n    enabled: true\n    schedule: \"@daily\"\n" + s3,
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Rejected).To(BeEmpty())
				g.Expect(p.Operations).To(ContainElement(And(HaveField("Type", "Backup"), HaveField("Description", And(
					HavePrefix("backups on schedule @daily and on demand to s3://backups/prod/prod/carts/<backup>/: one dump per shard (3 shards)"),
					ContainSubstring("not one of the whole cluster"))))))
			},
		},
		{
			name: "autoRestore is refused", base: base,
			head: shardedCluster + "  backup:\n    autoRestore: true\n" + s3,
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Rejected).To(ConsistOf(HavePrefix("backup.autoRestore: rejected at admission")))
			},
		},
		{
			name: "a new cluster restored from a sharded backup", base: empty,
			head: shardedCluster + "  restore:\n    key: prod/prod/carts/carts-20261130030000/\n" + s3,
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Rejected).To(BeEmpty())
				g.Expect(p.Operations).To(HaveLen(1))
				g.Expect(p.Operations[0].Description).To(And(
					HavePrefix("a new sharded cluster of 3 shards × 2 pods (6 pods), version 7.0.15, restored from s3://backups/prod/prod/carts/carts-20261130030000/: each shard's first pod loads that shard's dump"),
					ContainSubstring("The backup must hold 3 shards")))
			},
		},
		{
			name: "a replication cluster's dump is refused", base: empty,
			head: shardedCluster + "  restore:\n    key: prod/prod/shop/shop-1.rdb\n" + s3,
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Rejected).To(ConsistOf(HavePrefix("restore.key: rejected at admission, a sharded cluster restores a sharded cluster's backup")))
			},
		},
		{
			name: "a sharded backup into a replication cluster is refused", base: empty,
			head: baseCluster + "  restore:\n    key: prod/prod/carts/carts-1/\n" + s3,
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Rejected).To(ConsistOf(HavePrefix("restore.key: rejected at admission, a key ending in / names a sharded cluster's backup")))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			head := writeFile(t, t.TempDir(), "head.yaml", tt.head)
			plans := predictFiles(g, tt.base, head, "")
			g.Expect(plans).To(HaveLen(1))
			tt.check(g, plans[0])
		})
	}
}
