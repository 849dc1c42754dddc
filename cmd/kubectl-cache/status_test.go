package main

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// `kubectl cache status` of a sharded cluster names its layout and each
// shard's slots, master and replicas, not a single master.
func TestStatusOfAShardedCluster(t *testing.T) {
	g := NewWithT(t)
	cc := &cachev1alpha1.CacheCluster{}
	cc.Namespace, cc.Name = "prod", "carts"
	cc.Spec.Mode, cc.Spec.Shards = cachev1alpha1.ModeSharded, ptr.To[int32](3)
	cc.Status.Phase, cc.Status.ReadyReplicas = cachev1alpha1.PhaseRunning, 6
	cc.Status.Shards = []cachev1alpha1.ShardStatus{
		{Index: 0, Slots: []string{"0-5461"}, Master: "carts-0", Replicas: []string{"carts-1"}},
		{Index: 1, Slots: []string{"5462-10922"}, Master: "carts-3", Replicas: []string{"carts-2"}},
		{Index: 2},
	}
	var out bytes.Buffer
	writeStatus(&out, cc)
	g.Expect(out.String()).To(ContainSubstring("CacheCluster prod/carts: Running, version -, 6/6 pods ready, sharded, 3 shards × 2 pods\n"))
	g.Expect(out.String()).To(MatchRegexp(`SHARD\s+SLOTS\s+MASTER\s+REPLICAS\n0\s+0-5461\s+carts-0\s+carts-1\n1\s+5462-10922\s+carts-3\s+carts-2\n2\s+-\s+-\s+-\n`))
}
