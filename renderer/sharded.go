package renderer

import (
	"strconv"

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
	return map[string]any{
		"enabled":                 true,
		"shards":                  int64(cc.ShardCount()),
		"replicasPerShard":        int64(cc.ReplicasPerShard()),
		"nodeTimeoutMilliseconds": nodeTimeoutMilliseconds(probeTimeoutSeconds),
		"replicaFailover":         replicaFailover(cc),
	}
}

// nodeTimeoutMilliseconds is cluster-node-timeout: the probe timeout.
func nodeTimeoutMilliseconds(probeTimeoutSeconds int32) int64 {
	return int64(probeTimeoutSeconds) * 1000
}

// replicaFailover: a shard's replicas may elect a new master
// (cluster-replica-no-failover no) while high availability and automatic
// failover are on (the defaults).
func replicaFailover(cc *cachev1alpha1.CacheCluster) bool {
	ha := cc.Spec.HighAvailability
	return ptr.Deref(ha.Enabled, true) && ptr.Deref(ha.AutoFailover, true)
}

// ClusterParameters are the Redis Cluster parameters a sharded cluster's
// redis.conf derives from spec.highAvailability, as CONFIG GET reports
// them: day-two sets them live on the nodes that run other values (both
// are changed by CONFIG SET on Redis 7.0 and Valkey 8.0). Nil for a
// replication cluster.
func ClusterParameters(cc *cachev1alpha1.CacheCluster) map[string]string {
	if !cc.IsSharded() {
		return nil
	}
	timeout := cc.Spec.HighAvailability.ProbeTimeoutSeconds
	if timeout == 0 {
		timeout = DefaultProbeTimeoutSeconds
	}
	noFailover := "yes"
	if replicaFailover(cc) {
		noFailover = "no"
	}
	return map[string]string{
		"cluster-node-timeout":        strconv.FormatInt(nodeTimeoutMilliseconds(timeout), 10),
		"cluster-replica-no-failover": noFailover,
	}
}
