//go:build e2e

package benchmarks

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/test/cluster"
)

// shardedFailover is one failover of a sharded cluster (3 shards × 1
// replica, probeTimeoutSeconds 1, so cluster-node-timeout 1000): the time
// from killing shard 1's master (SIGKILL) to the first write to a key of
// that shard acknowledged by a replica (SET, then WAIT 1 on the same
// connection to the key's master, through a cluster-aware client that
// learns the layout again after an error).
func shardedFailover(b *testing.B, c *cluster.Cluster, k8s client.Client, i int) time.Duration {
	b.StopTimer()
	ctx := context.Background()
	ns := fmt.Sprintf("bench-sharded-failover-%d", i)
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	cc := &cachev1alpha1.CacheCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "fo", Namespace: ns},
		Spec: cachev1alpha1.CacheClusterSpec{Version: "7.0.15", Mode: cachev1alpha1.ModeSharded, Shards: ptr.To[int32](3),
			HighAvailability: cachev1alpha1.HighAvailabilitySpec{ProbeTimeoutSeconds: int32(detection.Seconds())}},
	}
	if err := k8s.Create(ctx, cc); err != nil {
		b.Fatal(err)
	}
	master := waitShards(b, k8s, cc)
	secret := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fo-auth"}, secret); err != nil {
		b.Fatal(err)
	}
	var addrs []string
	for o := range 6 {
		p := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("fo-%d", o)}, p); err != nil {
			b.Fatal(err)
		}
		addrs = append(addrs, p.Status.PodIP+":6379")
	}
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Password: string(secret.Data["password"]),
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
	defer cl.Close()
	// A key of shard 1 (slots 5462-10922), as CLUSTER KEYSLOT says.
	key := ""
	for j := 0; key == ""; j++ {
		k := fmt.Sprintf("bench:%d", j)
		if s, err := cl.ClusterKeySlot(ctx, k).Result(); err == nil && s >= 5462 && s <= 10922 {
			key = k
		}
	}
	sw := shardWrite{c: cl, key: key}
	if _, err := ackedWrite(ctx, sw, 30*time.Second); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	start := time.Now()
	if err := c.KillContainer(ns, master, "redis"); err != nil {
		b.Fatal(err)
	}
	at, err := ackedWrite(ctx, sw, 60*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	_ = k8s.Delete(ctx, cc)
	return at.Sub(start)
}

// shardWrite writes one key of a shard: SET and WAIT 1 on one connection
// to the key's master, both in Set (ackedWrite's Set then Do would send
// them on different connections of the cluster client); Set fails unless a
// replica acknowledged the write.
type shardWrite struct {
	c   *redis.ClusterClient
	key string
}

func (s shardWrite) Set(ctx context.Context, _ string, value any, exp time.Duration) *redis.StatusCmd {
	cmd := redis.NewStatusCmd(ctx)
	m, err := s.c.MasterForKey(ctx, s.key)
	if err != nil {
		cmd.SetErr(err)
		return cmd
	}
	var wait *redis.Cmd
	if _, err := m.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.key, value, exp)
		wait = p.Do(ctx, "WAIT", 1, 200)
		return nil
	}); err != nil {
		s.c.ReloadState(ctx)
		cmd.SetErr(err)
		return cmd
	}
	if n, err := wait.Int64(); err != nil || n < 1 {
		cmd.SetErr(fmt.Errorf("WAIT 1: %d replicas (%v)", n, err))
	}
	return cmd
}

// Do answers the WAIT that Set already sent on the write's connection.
func (s shardWrite) Do(ctx context.Context, _ ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetVal(int64(1))
	return cmd
}

// waitShards waits until every slot is served and returns shard 1's master.
func waitShards(b *testing.B, k8s client.Client, cc *cachev1alpha1.CacheCluster) string {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		got := &cachev1alpha1.CacheCluster{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), got); err == nil &&
			meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionShardsReady) &&
			meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionReady) && len(got.Status.Shards) == 3 &&
			got.Status.Shards[1].Master != "" && len(got.Status.Shards[1].Replicas) == 1 {
			return got.Status.Shards[1].Master
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatal("the sharded cluster did not serve every slot within 3 minutes")
	return ""
}
