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
	"github.com/cacheops/cacheops/dayTwo/probe"
	"github.com/cacheops/cacheops/test/cluster"
)

// shardedCase is a variant of BenchmarkFailover's sharded cases.
type shardedCase struct {
	// replicas is spec.replicasPerShard.
	replicas int
	// forced: the cluster runs with autoFailover off
	// (cluster-replica-no-failover yes, so Redis elects no replica by
	// itself) and the benchmark plays an operator that drives the
	// failover: it probes the master every detection/4 and, once the
	// master has not answered for detection, sends CLUSTER FAILOVER FORCE
	// to the replica with the highest replication offset. cacheops does
	// not do this (docs/sharded.md says why); this measures what it would
	// gain.
	forced bool
}

// shardedResult is one failover: from the SIGKILL to the first write of
// the shard its master accepted (served) and to the first one a replica
// acknowledged (acked); forced tells whether the emulated operator sent
// CLUSTER FAILOVER FORCE (the killed master may be back first).
type shardedResult struct {
	served, acked time.Duration
	forced        bool
}

// shardedFailover is one failover of a sharded cluster (3 shards of a
// master and sc.replicas replicas, probeTimeoutSeconds 1, so
// cluster-node-timeout 1000): shard 1's master is killed (SIGKILL; the
// process-backed kubelet restarts it after 1 s) and writes to a key of
// that shard are tried every 5 ms through a cluster-aware client that
// learns the layout again after an error: SET, then WAIT 1 on the same
// connection to the key's master.
func shardedFailover(b *testing.B, c *cluster.Cluster, k8s client.Client, i int, sc shardedCase) shardedResult {
	b.StopTimer()
	ctx := context.Background()
	ns := fmt.Sprintf("bench-sharded-failover-%d", i)
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	cc := &cachev1alpha1.CacheCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "fo", Namespace: ns},
		Spec: cachev1alpha1.CacheClusterSpec{Version: "7.0.15", Mode: cachev1alpha1.ModeSharded, Shards: ptr.To[int32](3),
			ReplicasPerShard: ptr.To(int32(sc.replicas)),
			HighAvailability: cachev1alpha1.HighAvailabilitySpec{ProbeTimeoutSeconds: int32(detection.Seconds())}},
	}
	if sc.forced {
		cc.Spec.HighAvailability.AutoFailover = ptr.To(false)
	}
	if err := k8s.Create(ctx, cc); err != nil {
		b.Fatal(err)
	}
	shard := waitShards(b, k8s, cc, sc.replicas)
	secret := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fo-auth"}, secret); err != nil {
		b.Fatal(err)
	}
	password := string(secret.Data["password"])
	ips := map[string]string{}
	var addrs []string
	for o := range 3 * (1 + sc.replicas) {
		p := &corev1.Pod{}
		name := fmt.Sprintf("fo-%d", o)
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			b.Fatal(err)
		}
		ips[name] = p.Status.PodIP
		addrs = append(addrs, p.Status.PodIP+":6379")
	}
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Password: password,
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
	if _, _, err := shardRecovery(ctx, cl, key, 30*time.Second); err != nil {
		b.Fatal(err)
	}
	var forced <-chan bool
	b.StartTimer()
	start := time.Now()
	if err := c.KillContainer(ns, shard.Master, "redis"); err != nil {
		b.Fatal(err)
	}
	if sc.forced {
		forced = driveFailover(ctx, ips[shard.Master], shard.Replicas, ips, password)
	}
	served, acked, err := shardRecovery(ctx, cl, key, 60*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	r := shardedResult{served: served.Sub(start), acked: acked.Sub(start)}
	if forced != nil {
		r.forced = <-forced
	}
	_ = k8s.Delete(ctx, cc)
	return r
}

// shardRecovery writes key until a replica acknowledges a write and
// returns when the shard's master first accepted one and when a replica
// first acknowledged one.
func shardRecovery(ctx context.Context, cl *redis.ClusterClient, key string, limit time.Duration) (served, acked time.Time, err error) {
	sw := shardWrite{c: cl, key: key}
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		ok, n := sw.write(ctx)
		if ok && served.IsZero() {
			served = time.Now()
		}
		if ok && n >= 1 {
			return served, time.Now(), nil
		}
	}
	return served, acked, fmt.Errorf("no acknowledged write within %s", limit)
}

// driveFailover plays an operator that drives a shard's failover: it
// probes the master every detection/4; once the master has not answered
// for detection, it sends CLUSTER FAILOVER FORCE to the replica with the
// highest replication offset (the rule replication mode's failover
// follows). It reports whether it did; it gives up when the master
// answers again first (a restarted master keeps its slots) or after a
// minute.
func driveFailover(ctx context.Context, master string, replicas []string, ips map[string]string, password string) <-chan bool {
	done := make(chan bool, 1)
	go func() {
		mc := redis.NewClient(&redis.Options{Addr: master + ":6379", Password: password, DialTimeout: detection / 4,
			ReadTimeout: detection / 4, MaxRetries: -1, PoolSize: 1})
		defer mc.Close()
		var failingSince time.Time
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(detection / 4) {
			if err := mc.Ping(ctx).Err(); err == nil {
				if !failingSince.IsZero() {
					done <- false
					return
				}
				continue
			}
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if time.Since(failingSince) < detection {
				continue
			}
			best, bestOffset := "", int64(-1)
			for _, r := range replicas {
				rc := redis.NewClient(&redis.Options{Addr: ips[r] + ":6379", Password: password, DialTimeout: detection / 4, ReadTimeout: detection / 4})
				info, err := rc.Info(ctx, "replication").Result()
				_ = rc.Close()
				if err != nil {
					continue
				}
				if o := probe.ParseInfo(info).Offset; o > bestOffset {
					best, bestOffset = r, o
				}
			}
			if best == "" {
				continue
			}
			rc := redis.NewClient(&redis.Options{Addr: ips[best] + ":6379", Password: password})
			err := rc.Do(ctx, "CLUSTER", "FAILOVER", "FORCE").Err()
			_ = rc.Close()
			done <- err == nil
			return
		}
		done <- false
	}()
	return done
}

// reportSharded reports the acknowledged-write figures as report does
// (p50_s, max_s: comparable with the other cases) and the served ones.
func reportSharded(b *testing.B, runs []shardedResult) {
	var acked, served []time.Duration
	forced := 0
	for _, r := range runs {
		acked, served = append(acked, r.acked), append(served, r.served)
		if r.forced {
			forced++
		}
	}
	report(b, acked)
	p50, worst := quantiles(served)
	b.ReportMetric(p50.Seconds(), "served_p50_s")
	b.ReportMetric(worst.Seconds(), "served_max_s")
	b.ReportMetric(float64(forced), "forced")
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

// write sets the key on its master and waits for one replica: whether
// the master accepted the write and how many replicas acknowledged it.
func (s shardWrite) write(ctx context.Context) (bool, int64) {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	m, err := s.c.MasterForKey(ctx, s.key)
	if err != nil {
		return false, 0
	}
	var set *redis.StatusCmd
	var wait *redis.Cmd
	_, _ = m.Pipelined(ctx, func(p redis.Pipeliner) error {
		set = p.Set(ctx, s.key, time.Now().UnixNano(), 0)
		wait = p.Do(ctx, "WAIT", 1, 200)
		return nil
	})
	if set.Err() != nil {
		s.c.ReloadState(ctx)
		return false, 0
	}
	n, _ := wait.Int64()
	return true, n
}

// Do answers the WAIT that Set already sent on the write's connection.
func (s shardWrite) Do(ctx context.Context, _ ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetVal(int64(1))
	return cmd
}

// waitShards waits until every slot is served, every shard has its
// replicas, and returns shard 1.
func waitShards(b *testing.B, k8s client.Client, cc *cachev1alpha1.CacheCluster, replicas int) cachev1alpha1.ShardStatus {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		got := &cachev1alpha1.CacheCluster{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), got); err == nil &&
			meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionShardsReady) &&
			meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionReady) && len(got.Status.Shards) == 3 &&
			got.Status.Shards[1].Master != "" && len(got.Status.Shards[1].Replicas) == replicas {
			return got.Status.Shards[1]
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatal("the sharded cluster did not serve every slot within 3 minutes")
	return cachev1alpha1.ShardStatus{}
}
