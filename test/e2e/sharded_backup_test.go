//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/backup"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// snapshot copies the writes acknowledged so far.
func (w *shardWriter) snapshot() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.acked)
}

// keysOnTheirShards checks that every key a sharded cluster's masters
// hold lives on the master that serves its slot (CLUSTER KEYSLOT), and
// returns how many keys they hold in all.
func keysOnTheirShards(g Gomega, cc *cachev1alpha1.CacheCluster) int64 {
	ctx := context.Background()
	pw := password(g, cc.Namespace, cc.Name)
	got := getCC(g, cc)
	var total int64
	for _, sh := range got.Status.Shards {
		owned, err := plan.ParseSlotStrings(sh.Slots)
		g.Expect(err).NotTo(HaveOccurred())
		rc := redisAt(pod(g, cc.Namespace, sh.Master).Status.PodIP, pw)
		var cursor uint64
		for {
			keys, next, err := rc.Scan(ctx, cursor, "*", 1000).Result()
			g.Expect(err).NotTo(HaveOccurred())
			slots := make([]*redis.IntCmd, len(keys))
			_, err = rc.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i, k := range keys {
					slots[i] = p.ClusterKeySlot(ctx, k)
				}
				return nil
			})
			g.Expect(err).NotTo(HaveOccurred())
			for i, k := range keys {
				slot := int(slots[i].Val())
				in := false
				for _, r := range owned {
					in = in || (slot >= r.Start && slot <= r.End)
				}
				g.Expect(in).To(BeTrue(), "key %s (slot %d) is on shard %d's master %s, which serves %v", k, slot, sh.Index, sh.Master, sh.Slots)
			}
			total += int64(len(keys))
			if cursor = next; cursor == 0 {
				break
			}
		}
		rc.Close()
	}
	return total
}

// A 3-shard cluster under a cluster-aware writer is backed up to S3: one
// dump per shard, each from the shard's replica, with the slots it
// served, in one CacheBackup. A new sharded cluster restored from it holds
// every write acknowledged before the backup started, each key on the
// shard that serves its slot, every slot served. Retention then removes
// all of the backup's objects together.
func TestShardedBackupAndRestore(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-sharded-backup")
	target, store := backupTarget(g, ns, "sharded")
	cc := loadExample(t, "sharded", ns)
	cc.Spec.Backup.S3 = target
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	formed := waitShardsServing(g, cc)
	w := startShardWriter(g, cc)
	defer w.Stop()
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 500))

	// Every write acknowledged (WAIT 1: the shard's only replica has it)
	// before the backup is asked for is in it; the writer goes on.
	before := w.snapshot()
	out := kubectlCache(g, "backup", "sharded", "-n", ns, "--wait=3m")
	m := createdBackup.FindStringSubmatch(out)
	g.Expect(m).NotTo(BeNil(), out)
	name := m[1]
	t.Logf("kubectl cache backup:\n%s", out)
	g.Expect(out).To(ContainSubstring("completed: 3 shards, "))
	cb := getBackup(g, ns, name)
	g.Expect(cb.Status.Phase).To(Equal(cachev1alpha1.BackupCompleted))
	g.Expect(cb.Status.Attempts).To(BeEquivalentTo(1))
	folder := "e2e/" + ns + "/sharded/" + name + "/"
	g.Expect(cb.Status.Location.Key).To(Equal(folder))
	g.Expect(cb.Status.Shards).To(HaveLen(3))
	var keys, size int64
	for i, sh := range cb.Status.Shards {
		g.Expect(sh.Index).To(BeEquivalentTo(i))
		g.Expect(sh.Slots).To(Equal(formed.Status.Shards[i].Slots), "the slots shard %d served", i)
		g.Expect(sh.SourcePod).To(Equal(formed.Status.Shards[i].Replicas[0]), "shard %d's dump comes from its replica", i)
		g.Expect(sh.Key).To(Equal(folder + backup.ShardFile(i)))
		g.Expect(sh.Checksum).To(HavePrefix("sha256:"))
		g.Expect(sh.Keys).To(BeNumerically(">", 0))
		g.Expect(sh.RDBVersion).To(BeEquivalentTo(10))
		g.Expect(sh.BytesReceived).To(Equal(sh.Size))
		meta, err := store.Metadata(ctx, sh.Key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(meta.Keys).To(Equal(sh.Keys))
		g.Expect(meta.Checksum).To(Equal(sh.Checksum))
		g.Expect(meta.Slots).To(Equal(sh.Slots))
		keys, size = keys+sh.Keys, size+sh.Size
	}
	g.Expect(cb.Status.Keys).To(Equal(keys))
	g.Expect(cb.Status.Size).To(Equal(size))
	g.Expect(cb.Status.Keys).To(BeNumerically(">=", len(before)))
	manifest, err := store.Manifest(ctx, folder)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(manifest.Shards).To(HaveLen(3))
	g.Expect(manifest.Shards[2].Slots).To(Equal([]string{"10923-16383"}))
	t.Logf("backup %s: %d keys, %d bytes in %s; %s", name, cb.Status.Keys, cb.Status.Size,
		cb.Status.CompletionTime.Sub(cb.Status.StartTime.Time), cb.Status.Message)
	events := eventsByReason(g, ns)
	g.Expect(events[cachev1alpha1.EventBackupStarted]).To(ContainElement(HaveField("Message", ContainSubstring("streaming a snapshot of every shard at once"))))
	g.Expect(events[cachev1alpha1.EventBackupCompleted]).To(ContainElement(HaveField("Message", ContainSubstring("Backup "+name+": 3 shards"))))
	g.Expect(waitCondition(g, ns, "sharded", cachev1alpha1.ConditionLastBackupSucceeded, metav1.ConditionTrue).Message).To(ContainSubstring("3 shards"))
	w.Stop()
	checked, lost := w.Verify(g, cc)
	g.Expect(lost).To(BeEmpty(), "the source lost acknowledged writes")
	t.Logf("%d writes acknowledged in all, %d before the backup was asked for", checked, len(before))

	// Restore into a new sharded cluster of the same shard count.
	restored := loadExample(t, "sharded", ns)
	restored.Name = "restored"
	restored.Spec.Restore = &cachev1alpha1.RestoreSpec{Backup: name}
	created := time.Now()
	g.Expect(k8s.Create(ctx, restored)).To(Succeed())
	got := waitShardsServing(g, restored)
	cond := waitCondition(g, ns, "restored", cachev1alpha1.ConditionRestored, metav1.ConditionTrue)
	t.Logf("restored in %s: %s", time.Since(created).Round(time.Millisecond), cond.Message)
	for i, sh := range got.Status.Shards {
		g.Expect(sh.Slots).To(Equal(cb.Status.Shards[i].Slots), "shard %d serves the slots the backup recorded", i)
		g.Expect(sh.Master).To(Equal(fmt.Sprintf("restored-%d", 2*i)), "the shard's first pod, which loaded the dump")
	}
	g.Expect(keysOnTheirShards(g, restored)).To(Equal(cb.Status.Keys), "the restored masters hold the backup's keys, each on its slot's shard")
	copyOf := &shardWriter{acked: before}
	checked, lost = copyOf.Verify(g, restored)
	g.Expect(lost).To(BeEmpty(), "writes acknowledged before the backup missing from the restored cluster")
	t.Logf("%d writes acknowledged before the backup found in the restored cluster", checked)
	// The replicas synced from the restored masters.
	pw := password(g, ns, "restored")
	for _, sh := range got.Status.Shards {
		mc, rc := redisAt(pod(g, ns, sh.Master).Status.PodIP, pw), redisAt(pod(g, ns, sh.Replicas[0]).Status.PodIP, pw)
		n := mc.DBSize(ctx).Val()
		g.Eventually(func() int64 { return rc.DBSize(ctx).Val() }, limits.PodRestart, limits.Poll).Should(Equal(n), sh.Replicas[0])
		mc.Close()
		rc.Close()
	}

	// A sharded backup of another shard count is refused, saying what to
	// do; nothing is created.
	four := loadExample(t, "sharded", ns)
	four.Name, four.Spec.Shards = "four", ptr.To[int32](4)
	four.Spec.Restore = &cachev1alpha1.RestoreSpec{Backup: name}
	g.Expect(k8s.Create(ctx, four)).To(Succeed())
	stalled := waitCondition(g, ns, "four", cachev1alpha1.ConditionStalled, metav1.ConditionTrue)
	g.Expect(stalled.Reason).To(Equal(cachev1alpha1.ReasonRestoreIncompatible))
	g.Expect(stalled.Message).To(ContainSubstring("holds 3 shards and this cluster has 4"))
	g.Expect(stalled.Message).To(ContainSubstring("create the cluster with shards: 3, then change spec.shards to 4"))
	// Admission refuses a replication cluster's dump.
	bad := loadExample(t, "sharded", ns)
	bad.Name = "bad"
	bad.Spec.Restore = &cachev1alpha1.RestoreSpec{Key: "e2e/" + ns + "/sharded/x.rdb", S3: target}
	err = k8s.Create(ctx, bad)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("restore.key names the backup's folder and ends in /"))

	// Retention removes every object of a pruned backup together.
	g.Expect(k8s.Patch(ctx, cc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"backup":{"enabled":true,"schedule":"@every 5s","retention":{"count":1}}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cachev1alpha1.CacheBackup{}))).To(BeTrue(), "the first backup is pruned")
	}, 2*limits.PodRestart, limits.Poll).Should(Succeed())
	g.Expect(k8s.Patch(ctx, cc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"backup":{"enabled":false}}}`)))).To(Succeed())
	_, err = store.Manifest(ctx, folder)
	g.Expect(err).To(MatchError(ContainSubstring("not found")), "the manifest is removed")
	for i := range 3 {
		_, err := store.Metadata(ctx, folder+backup.ShardFile(i))
		g.Expect(err).To(HaveOccurred(), "shard %d's metadata is removed", i)
		_, err = store.Get(ctx, folder+backup.ShardFile(i))
		g.Expect(err).To(HaveOccurred(), "shard %d's dump is removed", i)
	}
	var pruned []string
	for _, e := range eventsByReason(g, ns)[cachev1alpha1.EventBackupPruned] {
		pruned = append(pruned, e.Message)
	}
	g.Expect(pruned).To(ContainElement(ContainSubstring("Removed backup " + name + " and its 3 shards' dumps in s3://sharded/" + folder)))
}

// The operator is killed while a sharded backup streams (its sources are
// slowed down, so the dumps last): the restarted operator takes the
// backup again, every shard of it, and it completes; no operation is left.
func TestShardedBackupRetriedAfterTheOperatorIsKilled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-sharded-backup-crash")
	t.Cleanup(func() {
		if t.Failed() {
			killManager()
			_ = startManager(managerBin, stateDir)
		}
	})
	target, store := backupTarget(g, ns, "crash")
	cc := loadExample(t, "sharded", ns)
	cc.Spec.Backup.S3 = target
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	waitShardsServing(g, cc)
	pw := password(g, ns, "sharded")
	// A test-only parameter, set on every pod directly: 2 ms a key, so
	// each shard's dump of about 2,000 keys lasts about 4 s.
	for o := range 6 {
		rc := redisAt(pod(g, ns, fmt.Sprintf("sharded-%d", o)).Status.PodIP, pw)
		g.Expect(rc.ConfigSet(ctx, "rdb-key-save-delay", "2000").Err()).To(Succeed())
		rc.Close()
	}
	const preload = 6000
	cl := clusterClient(g, cc)
	for i := 0; i < preload; i += 500 {
		_, err := cl.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j := i; j < i+500; j++ {
				p.Set(ctx, fmt.Sprintf("preload:%d", j), j, 0)
			}
			return nil
		})
		g.Expect(err).NotTo(HaveOccurred())
	}
	cl.Close()
	// Every replica holds its master's keys before the backup.
	for i := range 3 {
		mc, rc := redisAt(pod(g, ns, fmt.Sprintf("sharded-%d", 2*i)).Status.PodIP, pw), redisAt(pod(g, ns, fmt.Sprintf("sharded-%d", 2*i+1)).Status.PodIP, pw)
		n := mc.DBSize(ctx).Val()
		g.Expect(n).To(BeNumerically(">", preload/6))
		g.Eventually(func() int64 { return rc.DBSize(ctx).Val() }, limits.PodRestart, limits.Poll).Should(Equal(n))
		mc.Close()
		rc.Close()
	}

	name := backupNow(g, ns, "sharded")
	g.Eventually(func(g Gomega) {
		cb := getBackup(g, ns, name)
		g.Expect(cb.Status.Phase).To(Equal(cachev1alpha1.BackupRunning))
		g.Expect(cb.Status.Shards).To(HaveLen(3))
		g.Expect(getCC(g, cc).Status.Phase).To(Equal(cachev1alpha1.PhaseBackupRunning))
	}, limits.PodRestart, 20*time.Millisecond).Should(Succeed())
	time.Sleep(time.Second) // the sources are writing their snapshots
	killManager()
	cut := getBackup(g, ns, name)
	g.Expect(cut.Status.Phase).To(Equal(cachev1alpha1.BackupRunning), "no one recorded the cut attempt's end")
	g.Expect(cut.Status.Attempts).To(BeEquivalentTo(1))
	_, err := store.Manifest(ctx, cut.Status.Shards[0].Key[:strings.LastIndex(cut.Status.Shards[0].Key, "/")+1])
	g.Expect(err).To(HaveOccurred(), "no manifest: the folder is no complete backup")

	g.Expect(startManager(managerBin, stateDir)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cb := getBackup(g, ns, name)
		g.Expect(cb.Status.Phase).To(Equal(cachev1alpha1.BackupCompleted), cb.Status.Message)
	}, 2*limits.PodRestart, limits.Poll).Should(Succeed())
	cb := getBackup(g, ns, name)
	g.Expect(cb.Status.Attempts).To(BeEquivalentTo(2), "the cut attempt and the one that completed")
	g.Expect(cb.Status.Keys).To(BeEquivalentTo(preload))
	g.Expect(cb.Status.Shards).To(HaveLen(3))
	manifest, err := store.Manifest(ctx, cb.Status.Location.Key)
	g.Expect(err).NotTo(HaveOccurred())
	var inManifest int64
	for _, sh := range manifest.Shards {
		inManifest += sh.Keys
	}
	g.Expect(inManifest).To(BeEquivalentTo(preload))
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		g.Expect(got.Status.Operation).To(BeNil())
		g.Expect(got.Status.Phase).To(Equal(cachev1alpha1.PhaseRunning))
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	started := 0
	for _, e := range eventsByReason(g, ns)[cachev1alpha1.EventBackupStarted] {
		if strings.Contains(e.Message, "Backup "+name+" (attempt") {
			started++
		}
	}
	g.Expect(started).To(Equal(2))
	t.Logf("backup %s completed at attempt %d: %s", name, cb.Status.Attempts, cb.Status.Message)
}

// The stall detection runs on each shard's stream, and an attempt is all
// shards or nothing: with shard 1's one replica busy with a long
// background save and its other replica frozen, the attempt waits on the
// busy one, is aborted after the stall timeout (the other shards' dumps
// with it), and the retry takes every shard again, shard 1 from the other
// replica once it is back.
func TestShardedBackupStalledShardRetriesEveryShard(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-sharded-backup-stall")
	target, _ := backupTarget(g, ns, "sharded-stall")
	cc := loadExample(t, "sharded", ns)
	cc.Spec.ReplicasPerShard = ptr.To[int32](2)
	cc.Spec.HighAvailability.ProbeTimeoutSeconds = 1
	cc.Spec.Backup.S3 = target
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	formed := waitShardsServing(g, cc)
	g.Expect(formed.Status.Shards[1].Master).To(Equal("sharded-3"))
	pw := password(g, ns, "sharded")
	cl := clusterClient(g, cc)
	_, err := cl.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j := range 3000 {
			p.Set(ctx, fmt.Sprintf("preload:%d", j), j, 0)
		}
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	cl.Close()
	// The lower ordinal is chosen among equals: sharded-4 is made busy
	// with a save of about 1,000 keys at 100 ms a key, sharded-5 frozen.
	busy, other := "sharded-4", "sharded-5"
	bc := redisAt(pod(g, ns, busy).Status.PodIP, pw)
	defer bc.Close()
	g.Eventually(func() int64 { return bc.DBSize(ctx).Val() }, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 800))
	slowSave(g, bc)
	g.Expect(env.Freeze(ns, other, "redis")).To(Succeed())
	thawed := false
	defer func() {
		if !thawed {
			_ = env.Thaw(ns, other, "redis")
		}
	}()
	g.Eventually(func(g Gomega) {
		for _, n := range getCC(g, cc).Status.Nodes {
			if n.PodName == other {
				g.Expect(n.Ready).To(BeFalse())
			}
		}
	}, limits.PodRestart, limits.Poll).Should(Succeed())

	name := backupNow(g, ns, "sharded")
	g.Eventually(func(g Gomega) {
		cb := getBackup(g, ns, name)
		g.Expect(cb.Status.Phase).To(Equal(cachev1alpha1.BackupRunning))
		g.Expect(cb.Status.Shards).To(HaveLen(3))
		g.Expect(cb.Status.Shards[1].SourcePod).To(Equal(busy))
		g.Expect(cb.Status.Shards[1].SourceReason).To(ContainSubstring("the only in-sync replica, although it is busy with a background save"))
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	g.Expect(env.Thaw(ns, other, "redis")).To(Succeed())
	thawed = true

	g.Eventually(func(g Gomega) {
		cb := getBackup(g, ns, name)
		g.Expect(cb.Status.Phase).To(Equal(cachev1alpha1.BackupCompleted), cb.Status.Message)
	}, 2*limits.PodRestart, limits.Poll).Should(Succeed())
	cb := getBackup(g, ns, name)
	g.Expect(cb.Status.Attempts).To(BeEquivalentTo(2), "the stalled attempt and the one that completed")
	g.Expect(cb.Status.StalledSources).To(Equal([]string{busy}))
	g.Expect(cb.Status.Shards[1].SourcePod).To(Equal(other))
	g.Expect(cb.Status.Keys).To(BeEquivalentTo(3000))
	var aborted []string
	for _, e := range eventsByReason(g, ns)[cachev1alpha1.EventBackupAborted] {
		aborted = append(aborted, e.Message)
	}
	g.Expect(aborted).To(ConsistOf(And(
		ContainSubstring("Backup "+name+": attempt 1 aborted: no progress for "+backupStallTimeout.String()),
		ContainSubstring(busy+" is busy with a background save"),
	)))
	// The attempt that completed took every shard again.
	var second string
	for _, e := range eventsByReason(g, ns)[cachev1alpha1.EventBackupStarted] {
		if strings.HasPrefix(e.Message, "Backup "+name+" (attempt 2)") {
			second = e.Message
		}
	}
	g.Expect(second).To(And(ContainSubstring("shard 0 (slots 0-5461) from sharded-"), ContainSubstring("shard 1 (slots 5462-10922) from "+other),
		ContainSubstring("shard 2 (slots 10923-16383) from sharded-")))
	t.Logf("backup %s: %s; aborted: %v", name, cb.Status.Message, aborted)
}
