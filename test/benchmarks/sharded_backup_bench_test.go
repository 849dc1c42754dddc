//go:build e2e

package benchmarks

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/backup"
	"github.com/cacheops/cacheops/test/s3server"
)

// BenchmarkShardedBackup measures a sharded cluster's backup and restore
// on the process-backed cluster: a 3 × 1 cluster holding
// CACHEOPS_BENCH_SHARDED_BACKUP_MIB MiB (default 256) of keys with
// incompressible 512-byte values, backed up to S3 (versitygw on the same
// machine) by a CacheBackup, then restored into a new 3-shard cluster.
// "baseline" is what a person would script on the same data, in the same
// run: `redis-cli --rdb` from every shard's replica at once, to local
// files (no upload). Reported: the backup's time as the CacheBackup
// records it (startTime → completionTime: the snapshots, the streams, the
// upload, the manifest; as its BackupCompleted Event says, to the
// millisecond) and from its creation to Completed, its
// throughput, and the restore's time from the new cluster's creation to
// Restored=True with every slot served. Run with -benchtime 1x.
func BenchmarkShardedBackup(b *testing.B) {
	b.StopTimer()
	root := repoRoot()
	bin := filepath.Join(root, "bin")
	c, k8s, stop := startOperatorCluster(b, root, bin)
	defer stop()
	srv, err := s3server.Start(bin, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	mib := envInt("CACHEOPS_BENCH_SHARDED_BACKUP_MIB", 256)
	var backupS, backupWallS, baselineS, restoreS, bytes []float64
	for i := 0; i < b.N; i++ {
		r := shardedBackupRun(b, k8s, srv, srv.Endpoint(c.Gateway()), i, mib)
		backupS, backupWallS, baselineS, restoreS = append(backupS, r.backup.Seconds()), append(backupWallS, r.backupWall.Seconds()), append(baselineS, r.baseline.Seconds()), append(restoreS, r.restore.Seconds())
		bytes = append(bytes, float64(r.size))
	}
	mean := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	b.ReportMetric(mean(bytes)/(1<<20), "dump_MiB")
	b.ReportMetric(mean(baselineS), "baseline_s")
	b.ReportMetric(mean(bytes)/(1<<20)/mean(baselineS), "baseline_MiB_per_s")
	b.ReportMetric(mean(backupS), "backup_s")
	b.ReportMetric(mean(backupWallS), "backup_requested_to_completed_s")
	b.ReportMetric(mean(bytes)/(1<<20)/mean(backupS), "backup_MiB_per_s")
	b.ReportMetric(mean(restoreS), "restore_s")
	b.ReportMetric(mean(backupS)/mean(baselineS), "backup_to_baseline")
}

type shardedBackupResult struct {
	backup, backupWall, baseline, restore time.Duration
	size                                  int64
}

func shardedBackupRun(b *testing.B, k8s client.Client, srv *s3server.Server, endpoint string, i, mib int) shardedBackupResult {
	ctx := context.Background()
	ns := fmt.Sprintf("bench-sharded-backup-%d", i)
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: ns},
		StringData: map[string]string{"accessKeyID": srv.AccessKeyID, "secretAccessKey": srv.SecretAccessKey}}); err != nil {
		b.Fatal(err)
	}
	store, err := backup.NewStore(backup.Target{Endpoint: endpoint, Bucket: "bench", AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey, Insecure: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := store.EnsureBucket(ctx); err != nil {
		b.Fatal(err)
	}
	target := &cachev1alpha1.S3Target{Endpoint: endpoint, Bucket: "bench", CredentialsSecret: "s3", Insecure: true}
	sharded := func(name string) *cachev1alpha1.CacheCluster {
		return &cachev1alpha1.CacheCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: cachev1alpha1.CacheClusterSpec{Version: "7.0.15", Mode: cachev1alpha1.ModeSharded, Shards: ptr.To[int32](3),
				ReplicasPerShard: ptr.To[int32](1), Backup: cachev1alpha1.BackupSpec{S3: target}},
		}
	}
	cc := sharded("src")
	if err := k8s.Create(ctx, cc); err != nil {
		b.Fatal(err)
	}
	waitShards(b, k8s, cc, 1)
	got := &cachev1alpha1.CacheCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(cc), got); err != nil {
		b.Fatal(err)
	}
	pw := clusterPassword(b, k8s, ns, "src")
	ips := podIPs(b, k8s, ns, "src", 6)
	keys := mib << 11 // 512-byte values
	preloadSharded(b, ips, pw, keys)
	// Every replica holds its master's keys.
	for _, sh := range got.Status.Shards {
		m, r := redis.NewClient(&redis.Options{Addr: ips[sh.Master], Password: pw}), redis.NewClient(&redis.Options{Addr: ips[sh.Replicas[0]], Password: pw})
		for deadline := time.Now().Add(5 * time.Minute); r.DBSize(ctx).Val() != m.DBSize(ctx).Val(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%s did not catch up with %s", sh.Replicas[0], sh.Master)
			}
		}
		m.Close()
		r.Close()
	}

	// Baseline: redis-cli --rdb from every replica at once.
	dir := b.TempDir()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(got.Status.Shards))
	for j, sh := range got.Status.Shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			host, port, _ := net.SplitHostPort(ips[sh.Replicas[0]])
			out, err := exec.Command("redis-cli", "-h", host, "-p", port, "-a", pw, "--no-auth-warning", "--rdb", filepath.Join(dir, fmt.Sprintf("shard-%d.rdb", j))).CombinedOutput()
			if err != nil {
				errs[j] = fmt.Errorf("redis-cli --rdb: %v: %s", err, out)
			}
		}()
	}
	wg.Wait()
	baseline := time.Since(start)
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}

	cb := &cachev1alpha1.CacheBackup{ObjectMeta: metav1.ObjectMeta{Name: "src-bench", Namespace: ns}, Spec: cachev1alpha1.CacheBackupSpec{Cluster: "src"}}
	requested := time.Now()
	if err := k8s.Create(ctx, cb); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			b.Fatal(err)
		}
		if cb.Status.Phase == cachev1alpha1.BackupCompleted {
			break
		}
		if cb.Status.Phase == cachev1alpha1.BackupFailed || time.Now().After(deadline) {
			b.Fatalf("backup %s: %s: %s", cb.Name, cb.Status.Phase, cb.Status.Message)
		}
	}
	wall := time.Since(requested)
	// The operator's own measure, in its BackupCompleted Event (the
	// CacheBackup's times have whole seconds).
	took := completedIn(b, k8s, ns, cb.Name)
	b.Logf("dataset: %d keys of 512 bytes; backup: %d keys, %d bytes in %d shards, %s (requested → completed %s; %s); baseline redis-cli --rdb ×3 in parallel: %s",
		keys, cb.Status.Keys, cb.Status.Size, len(cb.Status.Shards), took, wall.Round(time.Millisecond), cb.Status.Message, baseline.Round(time.Millisecond))
	if cb.Status.Keys != int64(keys) {
		b.Fatalf("the backup holds %d keys, want %d", cb.Status.Keys, keys)
	}

	restored := sharded("copy")
	restored.Spec.Restore = &cachev1alpha1.RestoreSpec{Backup: cb.Name}
	created := time.Now()
	if err := k8s.Create(ctx, restored); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(restored), got); err != nil {
			b.Fatal(err)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionRestored)
		if c != nil && c.Status == metav1.ConditionTrue && meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionShardsReady) {
			b.Logf("restore: %s in %s", c.Message, time.Since(created).Round(time.Millisecond))
			break
		}
		if c != nil && c.Status == metav1.ConditionFalse || time.Now().After(deadline) {
			b.Fatalf("restore: %+v", c)
		}
	}
	restore := time.Since(created)
	_ = k8s.Delete(ctx, restored)
	_ = k8s.Delete(ctx, cc)
	return shardedBackupResult{backup: took, backupWall: wall, baseline: baseline, restore: restore, size: cb.Status.Size}
}

func clusterPassword(b *testing.B, k8s client.Client, ns, name string) string {
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + "-auth"}, s); err != nil {
		b.Fatal(err)
	}
	return string(s.Data["password"])
}

// podIPs maps each pod of a cluster to its ip:6379.
func podIPs(b *testing.B, k8s client.Client, ns, name string, n int) map[string]string {
	out := map[string]string{}
	for o := range n {
		p := &corev1.Pod{}
		pod := fmt.Sprintf("%s-%d", name, o)
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pod}, p); err != nil {
			b.Fatal(err)
		}
		out[pod] = p.Status.PodIP + ":6379"
	}
	return out
}

// preloadSharded writes keys of 512 random bytes through a cluster-aware
// client, a thousand per pipeline.
func preloadSharded(b *testing.B, ips map[string]string, pw string, keys int) {
	ctx := context.Background()
	var addrs []string
	for _, a := range ips {
		addrs = append(addrs, a)
	}
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Password: pw, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	defer cl.Close()
	val := make([]byte, 512)
	for i := 0; i < keys; i += 1000 {
		if _, err := cl.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j := i; j < min(i+1000, keys); j++ {
				_, _ = rand.Read(val)
				p.Set(ctx, fmt.Sprintf("bench:%d", j), string(val), 0)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

var completedEvent = regexp.MustCompile(` bytes in (\S+) to `)

// completedIn is how long a backup took by its BackupCompleted Event.
func completedIn(b *testing.B, k8s client.Client, ns, name string) time.Duration {
	events := &corev1.EventList{}
	if err := k8s.List(context.Background(), events, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason != cachev1alpha1.EventBackupCompleted || !strings.HasPrefix(e.Message, "Backup "+name+":") {
			continue
		}
		if m := completedEvent.FindStringSubmatch(e.Message); m != nil {
			d, err := time.ParseDuration(m[1])
			if err != nil {
				b.Fatal(err)
			}
			return d
		}
	}
	b.Fatalf("no BackupCompleted Event of %s", name)
	return 0
}
