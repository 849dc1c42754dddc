//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/api/meta"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// waitShardsServing waits until a sharded cluster is Running and Ready and
// every pod's node says cluster_state:ok with all 16384 slots served.
func waitShardsServing(g Gomega, cc *cachev1alpha1.CacheCluster) *cachev1alpha1.CacheCluster {
	var got *cachev1alpha1.CacheCluster
	g.Eventually(func(g Gomega) {
		got = waitRunning(g, cc)
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionShardsReady)).To(BeTrue())
		g.Expect(got.Status.Shards).To(HaveLen(int(cc.ShardCount())))
		for _, sh := range got.Status.Shards {
			g.Expect(sh.Master).NotTo(BeEmpty(), "shard %d", sh.Index)
			g.Expect(sh.Replicas).To(HaveLen(int(cc.ReplicasPerShard())), "shard %d", sh.Index)
		}
		for o := range cc.DesiredReplicas() {
			rc := operatorAt(g, cc, pod(g, cc.Namespace, fmt.Sprintf("%s-%d", cc.Name, o)).Status.PodIP)
			info, err := rc.ClusterInfo(context.Background()).Result()
			rc.Close()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(info).To(ContainSubstring("cluster_state:ok\r\n"))
			g.Expect(info).To(ContainSubstring("cluster_slots_assigned:16384\r\n"))
		}
	}, limits.ClusterReady, limits.Poll).Should(Succeed(), notReadyPods(cc.Namespace, "sharded CacheCluster "+cc.Name+" never served every slot"))
	return got
}

// clusterClient is a cluster-aware client seeded with every pod, as an
// application seeded with the headless Service's addresses is.
func clusterClient(g Gomega, cc *cachev1alpha1.CacheCluster) *redis.ClusterClient {
	return clusterClientWith(g, cc, 2*time.Second, 2*time.Second)
}

// clusterClientWith is clusterClient with its dial and read/write timeouts.
func clusterClientWith(g Gomega, cc *cachev1alpha1.CacheCluster, dial, rw time.Duration) *redis.ClusterClient {
	var addrs []string
	for o := range cc.DesiredReplicas() {
		addrs = append(addrs, pod(g, cc.Namespace, fmt.Sprintf("%s-%d", cc.Name, o)).Status.PodIP+":6379")
	}
	// With TLS the client follows MOVED to addresses: it checks the
	// Service's name, which every node's certificate carries.
	user, pw := clientCredentials(g, cc)
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Username: user, Password: pw, TLSConfig: clusterTLS(g, cc),
		DialTimeout: dial, ReadTimeout: rw, WriteTimeout: rw})
}

// examples/sharded.yaml (3 shards × 1 replica) is formed by day-two: the
// nodes meet, each shard's master serves a third of the slots, each
// replica follows its shard's master, and the cluster is Ready only then.
// A cluster-aware client writes and reads keys on every shard, and every
// write confirmed by WAIT 1 is on the shard's replica too.
func TestShardedClusterServesEverySlot(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-sharded")
	cc := loadExample(t, "sharded", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	// Ready is never True before the nodes serve every slot: every pod
	// answers PING long before.
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		g.Expect(got.Status.ReadyReplicas).To(Equal(int32(6)))
		if !meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionShardsReady) {
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionReady)).To(BeFalse(), "Ready while the slots are not served")
		}
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionReady)).To(BeTrue())
	}, limits.ClusterReady, 50*time.Millisecond).Should(Succeed())
	got := waitShardsServing(g, cc)

	// status.shards is what the nodes say: an even spread, the first pod
	// of each shard its master, the second its replica.
	g.Expect(layoutOf(got.Status.Shards)).To(Equal([]cachev1alpha1.ShardStatus{
		{Index: 0, Slots: []string{"0-5461"}, Master: "sharded-0", Replicas: []string{"sharded-1"}},
		{Index: 1, Slots: []string{"5462-10922"}, Master: "sharded-2", Replicas: []string{"sharded-3"}},
		{Index: 2, Slots: []string{"10923-16383"}, Master: "sharded-4", Replicas: []string{"sharded-5"}},
	}))
	for o := range 6 {
		want := cachev1alpha1.RoleMaster
		if o%2 == 1 {
			want = cachev1alpha1.RoleReplica
		}
		g.Expect(pod(g, ns, fmt.Sprintf("sharded-%d", o)).Labels[cachev1alpha1.LabelRole]).To(Equal(want))
	}

	cluster := clusterClient(g, cc)
	defer cluster.Close()
	const keys = 3000
	for i := range keys {
		key := fmt.Sprintf("k:%d", i)
		g.Expect(cluster.Set(ctx, key, "v"+key, 0).Err()).To(Succeed())
	}
	for i := range keys {
		key := fmt.Sprintf("k:%d", i)
		g.Expect(cluster.Get(ctx, key).Val()).To(Equal("v"+key), key)
	}
	// Every shard holds a share of the keys, and its replica the same.
	pw := password(g, ns, "sharded")
	total := int64(0)
	for _, sh := range got.Status.Shards {
		rc := redisAt(pod(g, ns, sh.Master).Status.PodIP, pw)
		n, err := rc.DBSize(ctx).Result()
		rc.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(BeNumerically(">", keys/6), "shard %d holds a share", sh.Index)
		total += n
		// A write on the shard's master, on one connection, is
		// confirmed by its replica.
		mc := redisAt(pod(g, ns, sh.Master).Status.PodIP, pw)
		conn := mc.Conn()
		key, err := conn.RandomKey(ctx).Result()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(conn.Set(ctx, key, "v"+key, 0).Err()).To(Succeed())
		g.Expect(conn.Do(ctx, "WAIT", 1, 2000).Int64()).To(Equal(int64(1)), "shard %d's replica confirms", sh.Index)
		conn.Close()
		mc.Close()
		g.Eventually(func(g Gomega) {
			rc := redisAt(pod(g, ns, sh.Replicas[0]).Status.PodIP, pw)
			defer rc.Close()
			g.Expect(rc.DBSize(ctx).Result()).To(Equal(n), "replica %s", sh.Replicas[0])
		}, limits.PodRestart, limits.Poll).Should(Succeed())
	}
	g.Expect(total).To(Equal(int64(keys)))
}

// The operator dies right after it gave the first shard its slots; the
// restarted operator reads what the nodes say and finishes the same
// cluster: no slot is given twice, every shard is formed.
func TestShardedOperatorKilledMidBootstrap(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-sharded-crash")
	t.Cleanup(func() {
		if t.Failed() {
			killManager()
			_ = startManager(managerBin, stateDir)
		}
	})
	killManager()
	g.Expect(startManager(managerBin, stateDir, "--watch-namespaces="+ns, "--fault-exit-after-step=ClusterAddSlots")).To(Succeed())
	cc := loadExample(t, "sharded", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	code, err := managerExit(limits.ClusterReady)
	g.Expect(err).NotTo(HaveOccurred(), "the manager exits after the first CLUSTER ADDSLOTSRANGE")
	g.Expect(code).To(Equal(3))

	// Halfway: one shard's slots are served, the cluster is not Ready.
	pw := password(g, ns, "sharded")
	rc := redisAt(pod(g, ns, "sharded-0").Status.PodIP, pw)
	info, err := rc.ClusterInfo(ctx).Result()
	rc.Close()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info).To(ContainSubstring("cluster_state:fail\r\n"))
	g.Expect(info).To(ContainSubstring("cluster_slots_assigned:5462\r\n"))
	half := getCC(g, cc)
	g.Expect(meta.IsStatusConditionTrue(half.Status.Conditions, cachev1alpha1.ConditionReady)).To(BeFalse())
	g.Expect(half.Status.Phase).To(Equal(cachev1alpha1.PhaseInitializing))

	g.Expect(startManager(managerBin, stateDir)).To(Succeed())
	got := waitShardsServing(g, cc)
	g.Expect(got.Status.Shards[0].Slots).To(Equal([]string{"0-5461"}))
	g.Expect(got.Status.Shards[2].Slots).To(Equal([]string{"10923-16383"}))
	g.Expect(got.Status.Shards[1].Slots).To(Equal([]string{"5462-10922"}))
}

// shardWriter writes numbered keys through a cluster-aware client; a write
// counts as acknowledged only when WAIT 1, sent on the same connection to
// the key's master, says the shard's replica has it.
type shardWriter struct {
	cc *redis.ClusterClient

	mu       sync.Mutex
	acked    map[string]string
	ackedAt  []time.Time
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func startShardWriter(g Gomega, cc *cachev1alpha1.CacheCluster) *shardWriter {
	w := &shardWriter{cc: clusterClientWith(g, cc, 300*time.Millisecond, 500*time.Millisecond), acked: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *shardWriter) run() {
	defer close(w.done)
	ctx := context.Background()
	for i := 0; ; i++ {
		select {
		case <-w.stop:
			return
		default:
		}
		key, val := fmt.Sprintf("w:%06d", i), fmt.Sprintf("v%d-%d", i, time.Now().UnixNano())
		if w.write(ctx, key, val) {
			w.mu.Lock()
			w.acked[key] = val
			w.ackedAt = append(w.ackedAt, time.Now())
			w.mu.Unlock()
			continue
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// write sets key on its slot's master and waits for one replica, both on
// one connection.
func (w *shardWriter) write(ctx context.Context, key, val string) bool {
	opCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	m, err := w.cc.MasterForKey(opCtx, key)
	if err != nil {
		return false
	}
	var wait *redis.Cmd
	if _, err := m.Pipelined(opCtx, func(p redis.Pipeliner) error {
		p.Set(opCtx, key, val, 0)
		wait = p.Do(opCtx, "WAIT", 1, 300)
		return nil
	}); err != nil {
		// A MOVED or a dead master: learn the layout again.
		w.cc.ReloadState(ctx)
		return false
	}
	n, err := wait.Int64()
	return err == nil && n >= 1
}

// Stop ends the writer; a second Stop does nothing.
func (w *shardWriter) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		<-w.done
		_ = w.cc.Close()
	})
}

// longestPause is the longest time without an acknowledged write in
// [from, to], its end included: how long some client could not write.
// Writes go to every shard, so a shard that stops confirming shows as the
// time between the writes to it; the writer writes keys in order, so one
// shard's stop is one pause of the writer.
func (w *shardWriter) longestPause(from, to time.Time) time.Duration {
	_, d := w.longestPauseAt(from, to)
	return d
}

// longestPauseAt is longestPause and when the pause began.
func (w *shardWriter) longestPauseAt(from, to time.Time) (time.Time, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var longest time.Duration
	at, prev := from, from
	for _, t := range w.ackedAt {
		if t.Before(from) || t.After(to) {
			continue
		}
		if t.Sub(prev) > longest {
			at, longest = prev, t.Sub(prev)
		}
		prev = t
	}
	if to.Sub(prev) > longest {
		at, longest = prev, to.Sub(prev)
	}
	return at, longest
}

func (w *shardWriter) ackedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// Verify reads every acknowledged key back through a fresh cluster client.
func (w *shardWriter) Verify(g Gomega, cc *cachev1alpha1.CacheCluster) (checked int, lost []string) {
	rc := clusterClient(g, cc)
	defer rc.Close()
	ctx := context.Background()
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, v := range w.acked {
		if got, err := rc.Get(ctx, k).Result(); err != nil || got != v {
			lost = append(lost, k)
		}
	}
	return len(w.acked), lost
}

// A shard's master is frozen (SIGSTOP) past the node timeout under a
// cluster-aware writer that confirms every write with WAIT 1: the shard's
// replica wins Redis Cluster's election, the other shards keep confirming
// writes meanwhile, status.shards and the labels name the new master, the
// old master thawed rejoins as its replica, and no confirmed write is lost.
func TestShardedMasterFrozenFailsOverWithinItsShard(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-sharded-fo")
	cc := loadExample(t, "sharded", ns)
	cc.Spec.HighAvailability.ProbeTimeoutSeconds = 1
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	waitShardsServing(g, cc)
	w := startShardWriter(g, cc)
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 300))

	g.Expect(env.Freeze(ns, "sharded-2", "redis")).To(Succeed())
	frozen, before := time.Now(), w.ackedCount()
	g.Eventually(func(g Gomega) {
		sh := getCC(g, cc).Status.Shards
		g.Expect(sh).To(HaveLen(3))
		g.Expect(sh[1].Master).To(Equal("sharded-3"))
	}, limits.PodRestart, limits.Poll).Should(Succeed(), "shard 1 fails over to its replica")
	t.Logf("shard 1: master frozen → status.shards names the new master in %s", time.Since(frozen).Round(10*time.Millisecond))
	g.Expect(w.ackedCount()).To(BeNumerically(">", before), "the other shards confirm writes while shard 1 fails over")
	g.Expect(env.Thaw(ns, "sharded-2", "redis")).To(Succeed())

	got := waitShardsServing(g, cc)
	g.Expect(layoutOf(got.Status.Shards)[1]).To(Equal(cachev1alpha1.ShardStatus{Index: 1, Slots: []string{"5462-10922"}, Master: "sharded-3", Replicas: []string{"sharded-2"}}))
	g.Expect(pod(g, ns, "sharded-3").Labels[cachev1alpha1.LabelRole]).To(Equal(cachev1alpha1.RoleMaster))
	g.Expect(pod(g, ns, "sharded-2").Labels[cachev1alpha1.LabelRole]).To(Equal(cachev1alpha1.RoleReplica))
	// Shard 1 confirms writes again, now that it has a replica.
	again := w.ackedCount()
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", again+300))
	w.Stop()
	checked, lost := w.Verify(g, cc)
	g.Expect(lost).To(BeEmpty(), "%d of %d acknowledged writes lost", len(lost), checked)
	t.Logf("%d acknowledged writes checked", checked)
	g.Expect(eventsByReason(g, ns)[cachev1alpha1.EventShardMasterChanged]).NotTo(BeEmpty())
}

// layoutOf is status.shards without the key counts, which follow the
// data.
func layoutOf(shards []cachev1alpha1.ShardStatus) []cachev1alpha1.ShardStatus {
	out := make([]cachev1alpha1.ShardStatus, len(shards))
	for i, sh := range shards {
		sh.ApproximateKeys = nil
		out[i] = sh
	}
	return out
}
