package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// shardsNotReady says why a sharded cluster does not serve yet although
// its pods may be ready: each pod answers PING long before the nodes have
// met and every slot has a master. Day-two reads that from the nodes into
// the ShardsReady condition; until it is True the cluster is not Ready
// (Initializing while it is formed, Degraded later). Empty for a
// replication cluster and for a sharded one that serves every slot.
func shardsNotReady(cc *cachev1alpha1.CacheCluster) string {
	if !cc.IsSharded() {
		return ""
	}
	c := meta.FindStatusCondition(cc.Status.Conditions, cachev1alpha1.ConditionShardsReady)
	switch {
	case c == nil:
		return "Redis Cluster: the nodes have not formed the cluster yet"
	case c.Status != metav1.ConditionTrue:
		return "Redis Cluster: " + c.Message
	}
	return ""
}
