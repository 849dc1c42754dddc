package renderer

import (
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// shardedValues are the chart values of a sharded cluster: every pod runs
// with cluster-enabled, and the Redis Cluster failure detector waits as long
// as a replication cluster's prober would (spec.highAvailability's
// probeTimeoutSeconds) before a shard's replicas may elect a new master.
// The layout (ordinal o in shard o / (1 + replicasPerShard)) is the
// StatefulSet's replicas; docs/sharded.md says why.
func shardedValues(cc *cachev1alpha1.CacheCluster, probeTimeoutSeconds int32) map[string]any {
	if !cc.IsSharded() {
		return map[string]any{"enabled": false}
	}
	ha := cc.Spec.HighAvailability
	failover := ptr.Deref(ha.Enabled, true) && ptr.Deref(ha.AutoFailover, true)
	return map[string]any{
		"enabled":                 true,
		"shards":                  int64(cc.ShardCount()),
		"replicasPerShard":        int64(cc.ReplicasPerShard()),
		"nodeTimeoutMilliseconds": int64(probeTimeoutSeconds) * 1000,
		"replicaFailover":         failover,
	}
}
