//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	daytwo "github.com/cacheops/cacheops/dayTwo"
	"github.com/cacheops/cacheops/dayTwo/backup"
)

// backupTarget gives a namespace the S3 credentials Secret and a bucket on
// the suite's S3 server, reached by the operator and the pods alike at the
// pod network's gateway.
func backupTarget(g Gomega, ns, bucket string) (*cachev1alpha1.S3Target, *backup.Store) {
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s3-credentials", Namespace: ns},
		StringData: map[string]string{"accessKeyID": s3.AccessKeyID, "secretAccessKey": s3.SecretAccessKey},
	})).To(Succeed())
	target := &cachev1alpha1.S3Target{
		Endpoint: s3.Endpoint(env.Gateway()), Bucket: bucket, Prefix: "e2e/",
		CredentialsSecret: "s3-credentials", Insecure: true,
	}
	store, err := backup.NewStore(backup.Target{Endpoint: target.Endpoint, Bucket: bucket, AccessKeyID: s3.AccessKeyID, SecretAccessKey: s3.SecretAccessKey, Insecure: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(store.EnsureBucket(ctx)).To(Succeed())
	return target, store
}

var createdBackup = regexp.MustCompile(`cachebackup/(\S+) created`)

// backupNow runs `kubectl cache backup` and returns the CacheBackup's name.
func backupNow(g Gomega, ns, cluster string, args ...string) string {
	out := kubectlCache(g, append([]string{"backup", cluster, "-n", ns}, args...)...)
	m := createdBackup.FindStringSubmatch(out)
	g.Expect(m).NotTo(BeNil(), out)
	return m[1]
}

func getBackup(g Gomega, ns, name string) *cachev1alpha1.CacheBackup {
	cb := &cachev1alpha1.CacheBackup{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cb)).To(Succeed())
	return cb
}

func condition(g Gomega, ns, name, typ string) *metav1.Condition {
	cc := &cachev1alpha1.CacheCluster{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cc)).To(Succeed())
	return meta.FindStatusCondition(cc.Status.Conditions, typ)
}

// waitCondition waits for a cluster's condition to have a status and
// returns it.
func waitCondition(g Gomega, ns, name, typ string, want metav1.ConditionStatus) *metav1.Condition {
	var c *metav1.Condition
	g.Eventually(func(g Gomega) {
		c = condition(g, ns, name, typ)
		g.Expect(c).NotTo(BeNil(), "no %s condition yet", typ)
		g.Expect(c.Status).To(Equal(want), c.Message)
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	return c
}

// A backup taken while a client writes, one taken after, a restore of the
// second into a new cluster with every acknowledged write, retention of
// scheduled backups, and a disaster recovery from the bucket alone after
// the source cluster and its history are deleted.
func TestBackupAndRestore(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := "e2e-backup"
	newNamespace(t, ns)
	target, store := backupTarget(g, ns, "backups")
	cc := loadExample(t, "basic", ns)
	cc.Spec.Backup.S3 = target
	cc.Spec.Backup.Retention = &cachev1alpha1.BackupRetention{Count: ptr.To[int32](2)}
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	before := waitReplicating(g, cc)
	pw := password(g, ns, "basic")
	w := startWorkload(ns, "basic", pw)
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 200))

	// On demand, while the client writes.
	first := backupNow(g, ns, "basic", "--wait=2m")
	cb1 := getBackup(g, ns, first)
	g.Expect(cb1.Status.Phase).To(Equal(cachev1alpha1.BackupCompleted))
	g.Expect(cb1.Status.Keys).To(BeNumerically(">", 0))
	g.Expect(cb1.Status.Checksum).To(HavePrefix("sha256:"))
	g.Expect(cb1.Status.SourcePod).NotTo(Equal(before.Status.CurrentMaster), "taken from a replica")
	g.Expect(cb1.Status.Location.Key).To(Equal("e2e/e2e-backup/basic/" + first + ".rdb"))
	g.Expect(metav1.IsControlledBy(cb1, before)).To(BeTrue(), "owned by its cluster")
	m1, err := store.Metadata(ctx, cb1.Status.Location.Key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m1.Keys).To(Equal(cb1.Status.Keys))
	g.Expect(m1.Checksum).To(Equal(cb1.Status.Checksum))
	t.Logf("backup under load: %d keys, %d bytes from %s", cb1.Status.Keys, cb1.Status.Size, cb1.Status.SourcePod)

	// Writes stopped and replicated: the next backup holds every
	// acknowledged write.
	w.Stop()
	master := pod(g, ns, before.Status.CurrentMaster)
	mc := redisAt(master.Status.PodIP, pw)
	defer mc.Close()
	g.Expect(mc.Wait(ctx, 2, 10*time.Second).Val()).To(BeEquivalentTo(2), "both replicas caught up")
	second := backupNow(g, ns, "basic", "--wait=2m")
	cb2 := getBackup(g, ns, second)
	g.Expect(cb2.Status.Keys).To(Equal(mc.DBSize(ctx).Val()))

	// Restore the Redis 7.0.15 dump (RDB 10) into a new Valkey 8.0.1
	// cluster: the way from Redis to Valkey through a backup.
	restored := loadExample(t, "basic", ns)
	restored.Name = "restored"
	restored.Spec.Engine, restored.Spec.Version = cachev1alpha1.EngineValkey, "8.0.1"
	restored.Spec.Restore = &cachev1alpha1.RestoreSpec{Backup: second}
	g.Expect(k8s.Create(ctx, restored)).To(Succeed())
	waitReplicating(g, restored)
	for _, name := range []string{"restored-0", "restored-1", "restored-2"} {
		g.Expect(serverOf(g, ns, "restored", name)).To(Equal("valkey 8.0.1"), name)
	}
	t.Logf("Restored: %s", waitCondition(g, ns, "restored", cachev1alpha1.ConditionRestored, metav1.ConditionTrue).Message)
	copyOf := &workload{ns: ns, cluster: "restored", password: password(g, ns, "restored"), acked: w.acked}
	checked, lost := copyOf.Verify(g)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes missing from the restored cluster")
	t.Logf("%d acknowledged writes of the redis 7.0.15 cluster found in the restored valkey 8.0.1 cluster", checked)

	// spec.restore is fixed at creation.
	err = k8s.Patch(ctx, restored, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"restore":{"backup":"`+first+`"}}}`)))
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("spec.restore is immutable"))

	// Scheduled backups; retention keeps two and removes the first one's
	// file with its object.
	g.Expect(k8s.Patch(ctx, before, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"backup":{"enabled":true,"schedule":"@every 5s"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		list := &cachev1alpha1.CacheBackupList{}
		g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		var scheduled, completed int
		for _, b := range list.Items {
			if b.Status.Phase == cachev1alpha1.BackupCompleted {
				completed++
				if b.Labels[daytwo.LabelScheduled] == "true" {
					scheduled++
				}
			}
		}
		g.Expect(scheduled).To(BeNumerically(">=", 1))
		g.Expect(completed).To(BeNumerically("<=", 2))
		g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: first}, &cachev1alpha1.CacheBackup{}))).To(BeTrue(), "the oldest backup is removed")
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	_, err = store.Metadata(ctx, cb1.Status.Location.Key)
	g.Expect(err).To(HaveOccurred(), "retention removes the stored file too")
	g.Expect(k8s.Patch(ctx, before, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"backup":{"enabled":false}}}`)))).To(Succeed())
	reasons := eventsByReason(g, ns)
	g.Expect(reasons).To(HaveKey(cachev1alpha1.EventBackupPruned))
	g.Expect(reasons).To(HaveKey(cachev1alpha1.EventBackupCompleted))

	// Disaster: the cluster and its history are gone; the bucket is not.
	// Wait for the newest backup to settle first.
	var newest *cachev1alpha1.CacheBackup
	g.Eventually(func(g Gomega) {
		list := &cachev1alpha1.CacheBackupList{}
		g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		newest = nil
		for i, b := range list.Items {
			g.Expect(b.Status.Phase).To(BeElementOf(cachev1alpha1.BackupCompleted, cachev1alpha1.BackupFailed), b.Name)
			if b.Status.Phase == cachev1alpha1.BackupCompleted && (newest == nil || newest.Status.CompletionTime.Before(b.Status.CompletionTime)) {
				newest = &list.Items[i]
			}
		}
		g.Expect(newest).NotTo(BeNil())
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	key := newest.Status.Location.Key
	g.Expect(k8s.Delete(ctx, before)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(newest), &cachev1alpha1.CacheBackup{}))
	}, limits.PodRestart, limits.Poll).Should(BeTrue(), "the history goes with its cluster")
	dr := loadExample(t, "basic", ns)
	dr.Name = "dr"
	dr.Spec.Restore = &cachev1alpha1.RestoreSpec{Key: key, S3: target}
	g.Expect(k8s.Create(ctx, dr)).To(Succeed())
	waitReplicating(g, dr)
	waitCondition(g, ns, "dr", cachev1alpha1.ConditionRestored, metav1.ConditionTrue)
	fromBucket := &workload{ns: ns, cluster: "dr", password: password(g, ns, "dr"), acked: w.acked}
	_, lost = fromBucket.Verify(g)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes missing after the disaster recovery")

	// Restored once is enough: with the dump gone from the bucket, a pod
	// added later starts and gets its data by replication.
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dr-restore"}, cm)).To(Succeed())
		g.Expect(cm.Data["state"]).To(Equal("done"))
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	g.Expect(store.Delete(ctx, key)).To(Succeed())
	g.Expect(k8s.Patch(ctx, dr, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":4}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		live := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dr), live)).To(Succeed())
		g.Expect(live.Status.ReadyReplicas).To(BeEquivalentTo(4))
		g.Expect(live.Status.Operation).To(BeNil())
	}, limits.PodRestart, limits.Poll).Should(Succeed(), notReadyPods(ns, "the fourth pod of dr never became ready"))
	_, lost = fromBucket.Verify(g)
	g.Expect(lost).To(BeEmpty())
}

// A failover that starts while a backup streams aborts the backup; it is
// taken again from a replica of the new master once the failover is done.
// The source is slowed down (rdb-key-save-delay) so the stream lasts long
// enough to be cut.
func TestFailoverAbortsABackupThatIsRetried(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := "e2e-backup-fo"
	newNamespace(t, ns)
	target, _ := backupTarget(g, ns, "failover")
	cc := loadExample(t, "basic", ns)
	cc.Spec.HighAvailability.ProbeTimeoutSeconds = 1
	cc.Spec.Backup.S3 = target
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	before := waitReplicating(g, cc)
	pw := password(g, ns, "basic")
	// A test-only parameter, so not one spec.config accepts: set on every
	// pod directly (no pod restarts in this test, so it stays).
	for i := range 3 {
		rc := redisAt(pod(g, ns, fmt.Sprintf("basic-%d", i)).Status.PodIP, pw)
		g.Expect(rc.ConfigSet(ctx, "rdb-key-save-delay", "2000").Err()).To(Succeed()) // µs per key
		_ = rc.Close()
	}
	preload(g, before.Status.CurrentMaster, ns, pw, failoverPreload)
	masters := watchMasters(t, ns)
	t.Cleanup(masters.stop)
	// At most 50 writes a second: each dump holds the preload plus what
	// the writer added, so how long the slowed dumps take (2 ms a key)
	// does not grow with the machine's speed (an unbounded writer added
	// thousands of keys a second, and the retried dump outlasted the
	// test). 10,000 keys make the first dump last 20 s, long enough for
	// the failover to abort it.
	w := startWorkloadEvery(ns, "basic", pw, 20*time.Millisecond)
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 50))
	started := time.Now()

	name := backupNow(g, ns, "basic")
	g.Eventually(func(g Gomega) {
		g.Expect(getBackup(g, ns, name).Status.Phase).To(Equal(cachev1alpha1.BackupRunning))
		live := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cc), live)).To(Succeed())
		g.Expect(live.Status.Phase).To(Equal(cachev1alpha1.PhaseBackupRunning))
		g.Expect(meta.IsStatusConditionTrue(live.Status.Conditions, cachev1alpha1.ConditionReady)).To(BeTrue(), "a backup does not make the cluster unready")
	}, limits.PodRestart, 20*time.Millisecond).Should(Succeed())
	capture(g, cc, "backup-running")

	master := before.Status.CurrentMaster
	g.Expect(env.Freeze(ns, master, "redis")).To(Succeed())
	g.Eventually(func(g Gomega) {
		live := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cc), live)).To(Succeed())
		g.Expect(live.Status.CurrentMaster).NotTo(Equal(master))
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	g.Expect(env.Thaw(ns, master, "redis")).To(Succeed())

	g.Eventually(func(g Gomega) {
		cb := getBackup(g, ns, name)
		g.Expect(cb.Status.Phase).To(Equal(cachev1alpha1.BackupCompleted), cb.Status.Message)
	}, 3*limits.PodRestart, limits.Poll).Should(Succeed())
	cb := getBackup(g, ns, name)
	g.Expect(cb.Status.Attempts).To(BeNumerically(">=", 2), "the aborted attempt and the one that completed")
	g.Expect(cb.Status.Keys).To(BeNumerically(">=", failoverPreload))
	g.Expect(cb.Status.Keys).To(BeNumerically("<", failoverPreload+int64(60*time.Since(started).Seconds())), "the writer adds at most 50 keys a second")
	g.Expect(cb.Status.BytesReceived).To(Equal(cb.Status.Size))
	after := &cachev1alpha1.CacheCluster{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cc), after)).To(Succeed())
	g.Expect(cb.Status.SourcePod).NotTo(Equal(after.Status.CurrentMaster), "the retry is taken from a replica of the new master")
	aborted := eventsByReason(g, ns)[cachev1alpha1.EventBackupAborted]
	g.Expect(aborted).NotTo(BeEmpty())
	var byFailover []string
	for _, e := range aborted {
		if strings.Contains(e.Message, "failover") {
			byFailover = append(byFailover, e.Message)
		}
		t.Logf("BackupAborted: %s", e.Message)
	}
	g.Expect(byFailover).NotTo(BeEmpty(), "the failover aborted the attempt")
	t.Logf("backup %s completed after %d attempts from %s (%s; %d keys) in %s", name, cb.Status.Attempts, cb.Status.SourcePod,
		cb.Status.SourceReason, cb.Status.Keys, cb.Status.CompletionTime.Sub(cb.CreationTimestamp.Time))
	w.finish(t, g, masters)
}

// failoverPreload is how many keys TestFailoverAbortsABackupThatIsRetried
// writes before its writer starts.
const failoverPreload = 10000

// preload writes n keys to the master and waits until both replicas
// have them.
// slowSave starts a background save on c that spends 100 ms on every key.
// BGSAVE is refused while another child runs, and a replica that has just
// loaded its master's data rewrites its append-only file: the save is
// tried again until that child has ended. The delay is the save's own, so
// it is set back at once.
func slowSave(g Gomega, c *redis.Client) {
	ctx := context.Background()
	g.Eventually(func(g Gomega) {
		info := c.Info(ctx, "persistence").Val()
		g.Expect(info).To(ContainSubstring("aof_rewrite_in_progress:0"))
		g.Expect(info).To(ContainSubstring("rdb_bgsave_in_progress:0"))
		g.Expect(c.ConfigSet(ctx, "rdb-key-save-delay", "100000").Err()).To(Succeed())
		err := c.BgSave(ctx).Err()
		g.Expect(c.ConfigSet(ctx, "rdb-key-save-delay", "0").Err()).To(Succeed())
		g.Expect(err).NotTo(HaveOccurred())
	}, limits.PodRestart, limits.Poll).Should(Succeed())
}

func preload(g Gomega, master, ns, pw string, n int) {
	ctx := context.Background()
	mc := redisAt(pod(g, ns, master).Status.PodIP, pw)
	defer mc.Close()
	pipe := mc.Pipeline()
	for i := range n {
		pipe.Set(ctx, fmt.Sprintf("preload:%d", i), i, 0)
	}
	_, err := pipe.Exec(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mc.Wait(ctx, 2, 10*time.Second).Val()).To(BeEquivalentTo(2))
}

// A backup passes over a replica busy with a background save; when that
// replica is the only one in sync, the attempt that waits on it is aborted
// after the stall timeout, saying why, and retried from the other replica
// once it is back.
func TestABackupStalledOnABusySourceIsRetriedElsewhere(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := "e2e-backup-stall"
	newNamespace(t, ns)
	target, _ := backupTarget(g, ns, "stall")
	cc := loadExample(t, "basic", ns)
	cc.Spec.HighAvailability.ProbeTimeoutSeconds = 1
	cc.Spec.Backup.S3 = target
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	before := waitReplicating(g, cc)
	pw := password(g, ns, "basic")
	preload(g, before.Status.CurrentMaster, ns, pw, 3000)
	var replicas []string
	for _, n := range before.Status.Nodes {
		if n.PodName != before.Status.CurrentMaster {
			replicas = append(replicas, n.PodName)
		}
	}
	sort.Strings(replicas)
	g.Expect(replicas).To(HaveLen(2))
	// The lower ordinal is the one chosen among equals: make it busy.
	busy, other := replicas[0], replicas[1]

	// A save of 3,000 keys at 100 ms a key keeps busy saving for five
	// minutes; the delay is the save's own, so it is set back at once.
	bc := redisAt(pod(g, ns, busy).Status.PodIP, pw)
	defer bc.Close()
	slowSave(g, bc)
	time.Sleep(2 * time.Second) // a few probes (every 250 ms) see it saving

	// 1. The choice: the idle replica.
	chosen := backupNow(g, ns, "basic", "--wait=2m")
	cb := getBackup(g, ns, chosen)
	g.Expect(cb.Status.Phase).To(Equal(cachev1alpha1.BackupCompleted), cb.Status.Message)
	g.Expect(cb.Status.SourcePod).To(Equal(other))
	g.Expect(cb.Status.SourceReason).To(ContainSubstring(busy + " is busy with a background save"))
	g.Expect(cb.Status.Attempts).To(BeEquivalentTo(1))
	t.Logf("backup %s from %s: %s", chosen, cb.Status.SourcePod, cb.Status.SourceReason)

	// 2. The stall: with the other replica frozen (not Ready), the busy
	// one is the only source; the attempt gets no snapshot from it.
	g.Expect(env.Freeze(ns, other, "redis")).To(Succeed())
	thawed := false
	defer func() {
		if !thawed {
			_ = env.Thaw(ns, other, "redis")
		}
	}()
	g.Eventually(func(g Gomega) {
		live := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cc), live)).To(Succeed())
		for _, n := range live.Status.Nodes {
			if n.PodName == other {
				g.Expect(n.Ready).To(BeFalse())
			}
		}
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	name := backupNow(g, ns, "basic")
	g.Eventually(func(g Gomega) {
		cb := getBackup(g, ns, name)
		g.Expect(cb.Status.Phase).To(Equal(cachev1alpha1.BackupRunning))
		g.Expect(cb.Status.SourcePod).To(Equal(busy))
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	stalledAt := time.Now()
	g.Expect(getBackup(g, ns, name).Status.SourceReason).To(ContainSubstring("the only in-sync replica, although it is busy with a background save"))
	g.Expect(env.Thaw(ns, other, "redis")).To(Succeed())
	thawed = true

	g.Eventually(func(g Gomega) {
		cb := getBackup(g, ns, name)
		g.Expect(cb.Status.Phase).To(Equal(cachev1alpha1.BackupCompleted), cb.Status.Message)
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	cb = getBackup(g, ns, name)
	g.Expect(cb.Status.Attempts).To(BeEquivalentTo(2), "the stalled attempt and the one that completed")
	g.Expect(cb.Status.StalledSources).To(Equal([]string{busy}))
	g.Expect(cb.Status.SourcePod).To(Equal(other))
	g.Expect(cb.Status.Keys).To(BeEquivalentTo(3000))
	g.Expect(cb.Status.BytesReceived).To(Equal(cb.Status.Size))
	var stalls []string
	for _, e := range eventsByReason(g, ns)[cachev1alpha1.EventBackupAborted] {
		stalls = append(stalls, e.Message)
	}
	g.Expect(stalls).To(ConsistOf(And(
		ContainSubstring("Backup "+name+": attempt 1 aborted: no progress for "+backupStallTimeout.String()),
		ContainSubstring(busy+" is busy with a background save"),
	)))
	t.Logf("BackupAborted: %s", stalls[0])
	t.Logf("backup %s completed %s after the stalled attempt started, from %s: %s", name, cb.Status.CompletionTime.Sub(stalledAt).Round(time.Second), cb.Status.SourcePod, cb.Status.SourceReason)
	g.Expect(condition(g, ns, "basic", cachev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue), "the cluster kept serving")
}

// Backups that cannot be stored say so on the cluster, which keeps
// serving; a dump that does not match its checksum is never loaded.
func TestBackupAndRestoreFailuresAreReported(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := "e2e-backup-bad"
	newNamespace(t, ns)
	target, store := backupTarget(g, ns, "bad")

	// Wrong credentials.
	g.Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "wrong-credentials", Namespace: ns},
		StringData: map[string]string{"accessKeyID": "nobody", "secretAccessKey": "wrong"},
	})).To(Succeed())
	cc := loadExample(t, "basic", ns)
	wrong := *target
	wrong.CredentialsSecret = "wrong-credentials"
	cc.Spec.Backup.S3 = &wrong
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	waitReplicating(g, cc)
	name := backupNow(g, ns, "basic")
	failed := waitCondition(g, ns, "basic", cachev1alpha1.ConditionLastBackupSucceeded, metav1.ConditionFalse)
	g.Expect(failed.Reason).To(Equal(cachev1alpha1.ReasonBackupFailed))
	g.Expect(failed.Message).To(ContainSubstring(name))
	g.Expect(condition(g, ns, "basic", cachev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue), "the cluster keeps serving")
	t.Logf("LastBackupSucceeded=False: %s", failed.Message)

	// A dump whose bytes do not match its metadata.
	key := "e2e/corrupt.rdb"
	dump := "REDIS0010\xfa\x09redis-ver\x067.0.15\xfe\x00\xfb\x01\x00\x00\x01k\x01v\xff" + strings.Repeat("\x00", 8)
	g.Expect(store.Put(ctx, key, strings.NewReader(dump), int64(len(dump)))).To(Succeed())
	g.Expect(store.PutMetadata(ctx, key, backup.Metadata{Keys: 1, Size: int64(len(dump)), Checksum: "sha256:" + strings.Repeat("0", 64)})).To(Succeed())
	bad := loadExample(t, "basic", ns)
	bad.Name = "corrupt"
	bad.Spec.Replicas = ptr.To[int32](1)
	bad.Spec.Restore = &cachev1alpha1.RestoreSpec{Key: key, S3: target}
	g.Expect(k8s.Create(ctx, bad)).To(Succeed())
	g.Eventually(func(g Gomega) {
		log, err := os.ReadFile(filepath.Join(env.PodLogDir(), ns+"_corrupt-0_restore.log"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(log)).To(ContainSubstring("checksum sha256:"))
		g.Expect(string(log)).To(ContainSubstring("the metadata says sha256:0000"))
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	p := pod(g, ns, "corrupt-0")
	g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
	g.Expect(p.Status.ContainerStatuses[0].State.Running).To(BeNil(), "redis-server never starts on a dump that failed its checksum")
	g.Expect(condition(g, ns, "corrupt", cachev1alpha1.ConditionRestored)).To(BeNil())
	g.Expect(condition(g, ns, "corrupt", cachev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
}

// Every pod's data folder wiped at once: without autoRestore the cluster
// is Failed (DataLost) and says which backup to restore and how; the loss
// can be accepted. With autoRestore (whose pod restarts lose nothing) a
// second wipe rebuilds the cluster in place from that backup, with every
// write acknowledged before it and none after it.
func TestDisasterRecoveryFromTheLatestBackup(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := "e2e-disaster"
	newNamespace(t, ns)
	target, _ := backupTarget(g, ns, "disaster")
	cc := loadExample(t, "basic", ns)
	cc.Spec.Backup.S3 = target
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	before := waitReplicating(g, cc)
	pw := password(g, ns, "basic")
	w := startWorkload(ns, "basic", pw)
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 300))
	w.Stop()
	write := func(master, key string) {
		mc := redisAt(pod(g, ns, master).Status.PodIP, pw)
		defer mc.Close()
		g.Expect(mc.Set(ctx, key, "lost", 0).Err()).To(Succeed())
		g.Expect(mc.Wait(ctx, 2, 10*time.Second).Val()).To(BeEquivalentTo(2), "both replicas caught up")
	}
	write(before.Status.CurrentMaster, "before-the-backup")
	name := backupNow(g, ns, "basic", "--wait=2m")
	g.Expect(getBackup(g, ns, name).Status.Phase).To(Equal(cachev1alpha1.BackupCompleted))
	write(before.Status.CurrentMaster, "after-the-backup")

	seen := func() { waitKeysSeen(g, ns, "basic", 3) }
	disaster := func() { wipeEveryPod(g, ns, "basic", 3) }
	seen()
	disaster()

	// No autoRestore: Failed, saying what was lost and how to restore.
	lost := waitCondition(g, ns, "basic", cachev1alpha1.ConditionDataLost, metav1.ConditionTrue)
	t.Logf("DataLost: %s", lost.Message)
	g.Expect(lost.Message).To(ContainSubstring("came back without their data"))
	g.Expect(lost.Message).To(ContainSubstring("the latest backup is " + name))
	g.Expect(lost.Message).To(ContainSubstring("spec.backup.autoRestore: true"))
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		g.Expect(got.Status.Phase).To(Equal(cachev1alpha1.PhaseFailed))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionStalled)).To(BeTrue())
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	g.Expect(eventsByReason(g, ns)).To(HaveKey(cachev1alpha1.EventDataLost))

	// Accepted: the cluster serves what it holds, and the loss is not
	// found again.
	g.Expect(k8s.Patch(ctx, getCC(g, cc), client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+cachev1alpha1.AnnotationAcceptDataLoss+`":"true"}}}`)))).To(Succeed())
	accepted := waitCondition(g, ns, "basic", cachev1alpha1.ConditionDataLost, metav1.ConditionFalse)
	g.Expect(accepted.Reason).To(Equal(cachev1alpha1.ReasonDataLossAccepted))
	running := waitRunning(g, cc)
	g.Expect(running.Annotations).NotTo(HaveKey(cachev1alpha1.AnnotationAcceptDataLoss), "day-two removes the annotation")
	g.Expect(meta.FindStatusCondition(running.Status.Conditions, cachev1alpha1.ConditionDataLost).Reason).To(Equal(cachev1alpha1.ReasonDataLossAccepted))

	// autoRestore on: the pods restart once onto the restore init
	// container, with their data, which is no loss.
	write(running.Status.CurrentMaster, "after-the-accept")
	turnOnAutoRestore(g, cc)
	g.Expect(condition(g, ns, "basic", cachev1alpha1.ConditionDataLost).Reason).To(Equal(cachev1alpha1.ReasonDataLossAccepted), "restarts that kept the data are no loss")

	// The second disaster restores the backup by itself.
	seen()
	disaster()
	restored := waitCondition(g, ns, "basic", cachev1alpha1.ConditionDataLost, metav1.ConditionFalse)
	g.Eventually(func(g Gomega) {
		restored = condition(g, ns, "basic", cachev1alpha1.ConditionDataLost)
		g.Expect(restored.Reason).To(Equal(cachev1alpha1.ReasonDataRestored))
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	t.Logf("DataLost=False: %s", restored.Message)
	after := waitReplicating(g, cc)
	g.Expect(after.Status.Operation).To(BeNil())
	g.Expect(meta.IsStatusConditionTrue(after.Status.Conditions, cachev1alpha1.ConditionRestored)).To(BeTrue())
	g.Expect(after.Status.RestoreFrom).NotTo(BeNil())
	g.Expect(after.Status.RestoreFrom.Key).To(HaveSuffix(name + ".rdb"))
	checked, missing := w.Verify(g)
	g.Expect(missing).To(BeEmpty(), "acknowledged writes missing after the recovery")
	t.Logf("%d acknowledged writes found after the recovery", checked)
	mc := redisAt(pod(g, ns, after.Status.CurrentMaster).Status.PodIP, pw)
	defer mc.Close()
	g.Expect(mc.Exists(ctx, "before-the-backup").Val()).To(BeEquivalentTo(1))
	g.Expect(mc.Exists(ctx, "after-the-backup", "after-the-accept").Val()).To(BeZero(), "writes after the backup cannot come back")
	started := eventsByReason(g, ns)[cachev1alpha1.EventRestoreStarted]
	g.Expect(started).To(HaveLen(1))
	g.Expect(started[0].Message).To(ContainSubstring("restoring backup " + name))
	g.Expect(started[0].Message).To(ContainSubstring("writes after it are lost"))
	completed := eventsByReason(g, ns)[cachev1alpha1.EventRestoreCompleted]
	g.Expect(completed).To(HaveLen(1))
	t.Logf("%s", completed[0].Message)

	// Gone before the next tests, whose faults would make it churn.
	g.Expect(k8s.Delete(ctx, cc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		list := &corev1.PodList{}
		g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
	}, limits.Cleanup, limits.Poll).Should(Succeed())
}

// turnOnAutoRestore sets spec.backup.autoRestore and waits until every pod
// restarted onto the restore init container and the cluster runs.
func turnOnAutoRestore(g Gomega, cc *cachev1alpha1.CacheCluster) {
	mergePatch(g, cc, `{"spec":{"backup":{"autoRestore":true}}}`)
	g.Eventually(func(g Gomega) {
		sts := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), sts)).To(Succeed())
		g.Expect(sts.Spec.Template.Spec.InitContainers).To(HaveLen(1))
		// The counts are the new template's only once the StatefulSet
		// controller has seen it: just after the change, the old
		// revision's count matched, with no rollout started yet, and a
		// pod was being recreated under the next disaster (a CI
		// rehearsal, 2026-12-05).
		g.Expect(sts.Status.ObservedGeneration).To(Equal(sts.Generation))
		g.Expect(sts.Status.UpdatedReplicas).To(Equal(*sts.Spec.Replicas))
		got := getCC(g, cc)
		g.Expect(got.Status.Operation).To(BeNil())
		g.Expect(got.Status.Phase).To(Equal(cachev1alpha1.PhaseRunning))
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
}

// waitKeysSeen waits until the operator's probes have seen keys on every
// pod of a cluster: it knows the data only from them, and a loss is a run
// of redis-server that is empty after one that held keys.
func waitKeysSeen(g Gomega, ns, cluster string, replicas int) {
	g.Eventually(func(g Gomega) {
		for i := range replicas {
			g.Expect(metric(g, fmt.Sprintf(`cacheops_redis_keys{cluster=%q,namespace=%q,pod="%s-%d"}`, cluster, ns, cluster, i))).To(BeNumerically(">", 0))
		}
	}, limits.PodRestart, limits.Poll).Should(Succeed())
}

// wipeEveryPod is the disaster: every redis-server stopped, its data
// folder emptied, then killed; each comes back on an empty folder.
func wipeEveryPod(g Gomega, ns, cluster string, replicas int) {
	var pods []string
	for i := range replicas {
		pods = append(pods, fmt.Sprintf("%s-%d", cluster, i))
	}
	for _, p := range pods {
		g.Expect(env.Freeze(ns, p, "redis")).To(Succeed())
	}
	for _, p := range pods {
		dir := pvDir(g, ns, p)
		entries, err := os.ReadDir(dir)
		g.Expect(err).NotTo(HaveOccurred())
		for _, e := range entries {
			g.Expect(os.RemoveAll(filepath.Join(dir, e.Name()))).To(Succeed())
		}
	}
	for _, p := range pods {
		g.Expect(env.KillContainer(ns, p, "redis")).To(Succeed())
	}
}

// Backups to a PersistentVolumeClaim: the backup-store pod serves the
// claim to the operator. A backup while the claim is missing waits,
// saying why with the pod's reason, and the cluster keeps serving; once the claim exists,
// backups land as files on it, retention keeps exactly the configured
// number of files and objects, a new cluster restores every acknowledged
// write from the claim, and with autoRestore the cluster rebuilds itself
// from the claim after every pod lost its data.
func TestBackupToAVolumeAndRestore(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-pvc")
	cc := loadExample(t, "basic", ns)
	cc.Spec.Backup.PVC = &cachev1alpha1.PVCTarget{ClaimName: "backups", Prefix: "e2e/"}
	cc.Spec.Backup.Retention = &cachev1alpha1.BackupRetention{Count: ptr.To[int32](2)}
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	before := waitReplicating(g, cc)

	// No claim yet: the store pod cannot start, the backup waits and says
	// why.
	pending := backupNow(g, ns, "basic")
	c := waitCondition(g, ns, "basic", cachev1alpha1.ConditionLastBackupSucceeded, metav1.ConditionFalse)
	g.Expect(c.Message).To(ContainSubstring("the backup-store pod basic-backup-store-0 for claim backups is not ready"))
	t.Logf("without the claim: %s", c.Message)
	g.Expect(condition(g, ns, "basic", cachev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue), "the cluster keeps serving")

	g.Expect(k8s.Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	})).To(Succeed())
	// The backup waited for the store pod, without using up attempts.
	g.Eventually(func(g Gomega) {
		b := getBackup(g, ns, pending)
		g.Expect(b.Status.Phase).To(Equal(cachev1alpha1.BackupCompleted), b.Status.Message)
		g.Expect(b.Status.Attempts).To(BeEquivalentTo(1))
	}, limits.PodRestart, limits.Poll).Should(Succeed())

	pw := password(g, ns, "basic")
	w := startWorkload(ns, "basic", pw)
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 200))
	w.Stop()
	master := pod(g, ns, before.Status.CurrentMaster)
	mc := redisAt(master.Status.PodIP, pw)
	defer mc.Close()
	g.Expect(mc.Wait(ctx, 2, 10*time.Second).Val()).To(BeEquivalentTo(2), "both replicas caught up")
	name := backupNow(g, ns, "basic", "--wait=2m")
	cb := getBackup(g, ns, name)
	g.Expect(cb.Status.Keys).To(Equal(mc.DBSize(ctx).Val()))
	g.Expect(cb.Status.Location.PVC).NotTo(BeNil())
	g.Expect(cb.Status.Location.Key).To(Equal("e2e/e2e-pvc/basic/" + name + ".rdb"))

	// The dump and its metadata are files on the claim's volume.
	claim := &corev1.PersistentVolumeClaim{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "backups"}, claim)).To(Succeed())
	pv := &corev1.PersistentVolume{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, pv)).To(Succeed())
	folder := filepath.Join(pv.Spec.HostPath.Path, "e2e", ns, "basic")
	fi, err := os.Stat(filepath.Join(folder, name+".rdb"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.Size()).To(Equal(cb.Status.Size))
	md, err := backup.NewDirStore(pv.Spec.HostPath.Path, "pvc://backups").Metadata(ctx, cb.Status.Location.Key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(md.Checksum).To(Equal(cb.Status.Checksum))

	// Scheduled backups; retention leaves exactly two files and two
	// completed CacheBackups.
	g.Expect(k8s.Patch(ctx, before, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"backup":{"enabled":true,"schedule":"@every 5s"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		list := &cachev1alpha1.CacheBackupList{}
		g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		scheduled := 0
		for _, b := range list.Items {
			if b.Status.Phase == cachev1alpha1.BackupCompleted && b.Labels[daytwo.LabelScheduled] == "true" {
				scheduled++
			}
		}
		g.Expect(scheduled).To(BeNumerically(">=", 2))
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	g.Expect(k8s.Patch(ctx, before, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"backup":{"enabled":false}}}`)))).To(Succeed())
	var newest *cachev1alpha1.CacheBackup
	g.Eventually(func(g Gomega) {
		list := &cachev1alpha1.CacheBackupList{}
		g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		completed := map[string]bool{}
		newest = nil
		for i, b := range list.Items {
			g.Expect(b.Status.Phase).To(BeElementOf(cachev1alpha1.BackupCompleted, cachev1alpha1.BackupFailed), b.Name)
			if b.Status.Phase == cachev1alpha1.BackupCompleted {
				completed[b.Name+".rdb"] = true
				if newest == nil || newest.Status.CompletionTime.Before(b.Status.CompletionTime) {
					newest = &list.Items[i]
				}
			}
		}
		entries, err := os.ReadDir(folder)
		g.Expect(err).NotTo(HaveOccurred())
		files := map[string]bool{}
		for _, e := range entries {
			g.Expect(e.Name()).NotTo(HavePrefix(".partial"), "no partial upload is left")
			if strings.HasSuffix(e.Name(), ".rdb") {
				files[e.Name()] = true
			}
		}
		g.Expect(completed).To(HaveLen(2))
		g.Expect(files).To(Equal(completed), "the files on the claim are the completed backups")
	}, limits.PodRestart, limits.Poll).Should(Succeed())

	// Restore into a new cluster from the claim.
	restored := loadExample(t, "basic", ns)
	restored.Name = "restored"
	restored.Spec.Restore = &cachev1alpha1.RestoreSpec{Backup: newest.Name}
	g.Expect(k8s.Create(ctx, restored)).To(Succeed())
	waitReplicating(g, restored)
	t.Logf("Restored: %s", waitCondition(g, ns, "restored", cachev1alpha1.ConditionRestored, metav1.ConditionTrue).Message)
	copyOf := &workload{ns: ns, cluster: "restored", password: password(g, ns, "restored"), acked: w.acked}
	checked, lost := copyOf.Verify(g)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes missing from the restored cluster")
	t.Logf("%d acknowledged writes found in the cluster restored from the claim", checked)
	// Its own backup store served the check and goes once it is done.
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "restored-backup-store"}, &appsv1.StatefulSet{}))
	}, limits.PodRestart, limits.Poll).Should(BeTrue())

	// autoRestore from the claim: the pods restart once onto the restore
	// init container (the claim mounted read only); then every pod loses
	// its data and the cluster rebuilds itself from the newest backup.
	turnOnAutoRestore(g, before)
	waitKeysSeen(g, ns, "basic", 3)
	wipeEveryPod(g, ns, "basic", 3)
	g.Eventually(func(g Gomega) {
		c := condition(g, ns, "basic", cachev1alpha1.ConditionDataLost)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonDataRestored), c.Message)
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
	recovered := waitReplicating(g, before)
	g.Expect(recovered.Status.RestoreFrom.PVC).NotTo(BeNil())
	t.Logf("recovered in place from %s", recovered.Status.RestoreFrom)
	_, lost = w.Verify(g)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes missing after the recovery from the claim")

	for _, c := range []*cachev1alpha1.CacheCluster{before, restored} {
		g.Expect(k8s.Delete(ctx, c)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
	}, limits.PodRestart, limits.Poll).Should(Succeed())
}
