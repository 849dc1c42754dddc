package daytwo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/access"
	"github.com/cacheops/cacheops/dayTwo/backup"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// A sharded cluster's backup (plan/sharded_backup.go chooses the
// sources): one attempt streams every shard's dump at once, each from its
// own source, into the backup's folder; the manifest is written last. The
// attempt is one unit: a shard whose stream fails or stalls stops the
// others, and the retry takes every shard again, so the dumps of one
// backup are always asked for together.

// shardStream is one shard's dump in a sharded attempt.
type shardStream struct {
	plan.BackupSource
	addr     string
	slots    []string
	key      string
	start    time.Time
	end      time.Time
	progress progressReport
	res      backup.Result
}

// shardedAttempt is one attempt at a sharded cluster's backup.
type shardedAttempt struct {
	key        types.NamespacedName // the CacheBackup
	clusterKey types.NamespacedName
	cluster    *cachev1alpha1.CacheCluster
	uid        types.UID
	number     int32
	access     access.Config
	target     cachev1alpha1.BackupLocation // Key: the folder
	store      *backup.Store
	where      string
	start      time.Time
	streams    []*shardStream
}

// runShardedBackup begins one attempt of a sharded cluster's backup: the
// CacheBackup turns Running with every shard's source, and a goroutine
// streams all the dumps at once.
func (r *Reconciler) runShardedBackup(ctx context.Context, s *scope, a plan.Action) error {
	cc := s.cc
	cb, err := r.backupToRun(ctx, s)
	if cb == nil || err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(cb)
	store, target, err := r.openBackupTarget(ctx, cc, cb, func(prefix string) string {
		return backup.ShardedFolder(prefix, cc.Namespace, cc.Name, cb.Name)
	})
	if store == nil || err != nil {
		return err
	}
	att := &shardedAttempt{
		key: key, clusterKey: s.key, cluster: cc.DeepCopy(), uid: cb.UID, number: cb.Status.Attempts + 1, access: s.access,
		target: target, store: store, where: store.Where(target.Key), start: r.now(),
	}
	for _, src := range a.Sources {
		p, ok := s.snap.Pod(src.Pod)
		if !ok || p.IP == "" {
			return fmt.Errorf("shard %d's source %s has no address", src.Shard, src.Pod)
		}
		att.streams = append(att.streams, &shardStream{BackupSource: src, addr: net.JoinHostPort(p.IP, "6379"),
			slots: plan.SlotStrings(src.Slots), key: target.Key + backup.ShardFile(src.Shard)})
	}
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	if !r.backups.add(key, cc.Name, cancel) {
		cancel(nil)
		return nil
	}
	if err := r.markShardsRunning(ctx, att); err != nil {
		r.backups.done(key)
		cancel(nil)
		return err
	}
	var from []string
	for _, st := range att.streams {
		from = append(from, fmt.Sprintf("shard %d (slots %s) from %s (%s)", st.Shard, strings.Join(st.slots, ","), st.Pod, st.Why))
	}
	ctrl.LoggerFrom(ctx).Info("Sharded backup started", "backup", key.Name, "attempt", att.number, "folder", target.Key, "shards", len(att.streams))
	r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventBackupStarted, "Backup", "Backup %s (attempt %d): streaming a snapshot of every shard at once to %s: %s",
		key.Name, att.number, att.where, strings.Join(from, "; "))
	go r.streamShards(runCtx, cancel, att)
	return nil
}

// markShardsRunning records the attempt and each shard's source in the
// CacheBackup before anything streams.
func (r *Reconciler) markShardsRunning(ctx context.Context, att *shardedAttempt) error {
	return r.updateBackup(ctx, att.key, func(b *cachev1alpha1.CacheBackup) error {
		t := metav1.NewTime(att.start)
		b.Status.Phase, b.Status.Attempts, b.Status.StartTime, b.Status.CompletionTime = cachev1alpha1.BackupRunning, att.number, &t, nil
		b.Status.SourcePod, b.Status.SourceReason, b.Status.BytesReceived, b.Status.LastProgressTime = "", "", 0, &t
		b.Status.Message = fmt.Sprintf("streaming the snapshots of %d shards to %s", len(att.streams), att.where)
		b.Status.Shards = nil
		for _, st := range att.streams {
			b.Status.Shards = append(b.Status.Shards, cachev1alpha1.ShardBackup{
				Index: int32(st.Shard), Slots: st.slots, SourcePod: st.Pod, SourceReason: st.Why, Key: st.key, StartTime: &t,
			})
		}
		return nil
	})
}

// shardFailure is the first shard whose stream failed: it stops the
// others, and the attempt ends with its error.
type shardFailure struct {
	once  sync.Once
	shard *shardStream
	err   error
}

// streamShards takes every shard's dump at once, then the manifest, and
// records how the attempt ended; it runs in its own goroutine until all
// are stored or one fails, or runCtx is cancelled (a deleted backup, the
// operator stopping).
func (r *Reconciler) streamShards(runCtx context.Context, cancel context.CancelCauseFunc, att *shardedAttempt) {
	defer r.backups.done(att.key)
	defer cancel(nil)
	defer func() {
		if p := recover(); p != nil {
			r.backupFailed(context.Background(), att.cluster, att.key, att.uid, att.number, runCtx, fmt.Errorf("internal error: %v", p))
		}
	}()
	reported := make(chan struct{})
	reportCtx, stopReports := context.WithCancel(runCtx)
	go func() {
		defer close(reported)
		r.reportShardProgress(reportCtx, att)
	}()
	shardsCtx, stopShards := context.WithCancelCause(runCtx)
	defer stopShards(nil)
	var failed shardFailure
	var wg sync.WaitGroup
	for _, st := range att.streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.streamShard(shardsCtx, att, st); err != nil {
				failed.once.Do(func() {
					failed.shard, failed.err = st, err
					stopShards(fmt.Errorf("shard %d's dump from %s did not complete", st.Shard, st.Pod))
				})
			}
		}()
	}
	wg.Wait()
	stopReports()
	<-reported
	end := r.now()
	var size int64
	var checksum string
	err := failed.err
	if err == nil {
		size, checksum, err = att.store.PutManifest(runCtx, att.target.Key, att.manifest(end))
	}
	bg := context.Background()
	var stall *backup.StallError
	switch {
	case errors.As(err, &stall) && failed.shard != nil:
		r.backupStalled(bg, att.cluster, att.key, att.uid, att.number, failed.shard.Pod, stall)
	case err != nil && failed.shard != nil:
		r.backupFailed(bg, att.cluster, att.key, att.uid, att.number, runCtx, fmt.Errorf("shard %d from %s: %w", failed.shard.Shard, failed.shard.Pod, err))
	case err != nil:
		r.backupFailed(bg, att.cluster, att.key, att.uid, att.number, runCtx, err)
	default:
		r.shardedBackupCompleted(bg, att, end, size, checksum)
	}
}

// streamShard takes one shard's dump and stores its metadata.
func (r *Reconciler) streamShard(ctx context.Context, att *shardedAttempt, st *shardStream) error {
	st.start = r.now()
	res, err := backup.Take(ctx, backup.Source{Addr: st.addr, Access: att.access, Timeout: 30 * time.Second,
		StallTimeout: r.BackupStallTimeout, OnProgress: st.progress.set},
		func(ctx context.Context, rd io.Reader, size int64) error {
			return att.store.Put(ctx, st.key, rd, size)
		})
	if err != nil {
		return err
	}
	st.res, st.end = res, r.now()
	md := st.metadata()
	shard := st.Shard
	md.Cluster, md.Namespace, md.Backup, md.Shard, md.Slots = att.cluster.Name, att.cluster.Namespace, att.key.Name, &shard, st.slots
	return att.store.PutMetadata(ctx, st.key, md)
}

// metadata is the stored dump's facts.
func (st *shardStream) metadata() backup.Metadata {
	return st.res.Metadata(st.Pod, st.start, st.end)
}

// manifest lists the stored shards, as the restore reads them.
func (att *shardedAttempt) manifest(end time.Time) backup.Manifest {
	m := backup.Manifest{Cluster: att.cluster.Name, Namespace: att.cluster.Namespace, Backup: att.key.Name, StartTime: att.start.UTC(), EndTime: end.UTC()}
	for _, st := range att.streams {
		m.Shards = append(m.Shards, st.metadata().ShardEntry(st.Shard, st.slots))
	}
	return m
}

// askedWithin is how far apart the shards' snapshots were asked for: the
// first SYNC to the last.
func (att *shardedAttempt) askedWithin() time.Duration {
	first, last := att.streams[0].start, att.streams[0].start
	for _, st := range att.streams {
		first, last = minTime(first, st.start), maxTime(last, st.start)
	}
	return last.Sub(first)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// shardedBackupCompleted records a stored sharded backup: the CacheBackup
// (the shards' sums at the top, each shard below), the metrics, the
// cluster's last success, then the retention.
func (r *Reconciler) shardedBackupCompleted(ctx context.Context, att *shardedAttempt, end time.Time, manifestSize int64, manifestSum string) {
	log := ctrl.Log.WithName(ControllerName)
	took := end.Sub(att.start).Round(time.Millisecond)
	var size, keys, expiring int64
	var rdb int
	var unknown []string
	var parts []string
	for _, st := range att.streams {
		size += st.res.Size
		keys += st.res.Header.Keys
		expiring += st.res.Header.ExpiringKeys
		rdb = max(rdb, st.res.Header.RDBVersion)
		if st.res.HeaderErr != nil {
			unknown = append(unknown, fmt.Sprintf("shard %d's: %v", st.Shard, st.res.HeaderErr))
		}
		parts = append(parts, fmt.Sprintf("shard %d from %s: %d keys, %d bytes", st.Shard, st.Pod, st.res.Header.Keys, st.res.Size))
	}
	if len(unknown) > 0 {
		keys, expiring = -1, -1
	}
	within := att.askedWithin().Round(time.Millisecond)
	if uerr := r.finishAttempt(ctx, att.key, att.uid, att.number, func(b *cachev1alpha1.CacheBackup) {
		t := metav1.NewTime(end)
		b.Status.Phase, b.Status.CompletionTime = cachev1alpha1.BackupCompleted, &t
		b.Status.Message = fmt.Sprintf("%d shards; their snapshots were asked for within %s of each other", len(att.streams), within)
		if len(unknown) > 0 {
			b.Status.Message += "; the key count is unknown: " + strings.Join(unknown, "; ")
		}
		b.Status.Location = att.target.DeepCopy()
		b.Status.Size, b.Status.Checksum, b.Status.BytesReceived, b.Status.LastProgressTime = size, manifestSum, size, &t
		b.Status.RedisVersion, b.Status.RDBVersion, b.Status.ReplicationOffset = att.streams[0].res.Header.RedisVersion, int32(rdb), 0
		b.Status.Keys, b.Status.ExpiringKeys = keys, expiring
		b.Status.Shards = nil
		for _, st := range att.streams {
			start, done := metav1.NewTime(st.start), metav1.NewTime(st.end)
			h := st.res.Header
			b.Status.Shards = append(b.Status.Shards, cachev1alpha1.ShardBackup{
				Index: int32(st.Shard), Slots: st.slots, SourcePod: st.Pod, SourceReason: st.Why, Key: st.key,
				BytesReceived: st.res.Size, Size: st.res.Size, Checksum: st.res.Checksum,
				RedisVersion: h.RedisVersion, RDBVersion: int32(h.RDBVersion), ReplicationOffset: h.ReplicationOffset,
				Keys: h.Keys, ExpiringKeys: h.ExpiringKeys, StartTime: &start, CompletionTime: &done,
			})
		}
	}); uerr != nil {
		if !errors.Is(uerr, errSuperseded) {
			log.Error(uerr, "Recording a completed backup", "backup", att.key)
		}
		return
	}
	ck := att.clusterKey
	log.Info("Sharded backup completed", "backup", att.key, "shards", len(att.streams), "bytes", size, "keys", keys, "duration", took.String(), "askedWithin", within.String(), "manifestBytes", manifestSize)
	r.Recorder.Eventf(att.cluster, nil, corev1.EventTypeNormal, cachev1alpha1.EventBackupCompleted, "Backup",
		"Backup %s: %d shards, %d keys, %d bytes in %s to %s (snapshots asked for within %s): %s", att.key.Name, len(att.streams), keys, size, took, att.where, within, strings.Join(parts, "; "))
	backupDuration.WithLabelValues(ck.Namespace, ck.Name).Observe(took.Seconds())
	backupSize.WithLabelValues(ck.Namespace, ck.Name).Set(float64(size))
	backupLastSuccess.WithLabelValues(ck.Namespace, ck.Name).Set(float64(end.Unix()))
	if err := r.recordSuccess(ctx, ck, att.key.Name, end, fmt.Sprintf("%s completed at %s: %d shards, %d keys, %d bytes, %s",
		att.key.Name, end.UTC().Format(time.RFC3339), len(att.streams), keys, size, att.where)); err != nil {
		log.Error(err, "Recording the last successful backup", "cluster", ck)
	}
	if err := r.applyRetention(ctx, ck); err != nil {
		log.Error(err, "Applying backup retention", "cluster", ck)
	}
}

// reportShardProgress writes a sharded attempt's progress to its
// CacheBackup every progressWriteEvery while it changes, until ctx ends:
// the sum at the top, each shard's bytes below.
func (r *Reconciler) reportShardProgress(ctx context.Context, att *shardedAttempt) {
	t := time.NewTicker(progressWriteEvery)
	defer t.Stop()
	var writtenMsg string
	var writtenLast time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var received, size int64
		var last time.Time
		var waiting []string
		got := make([]int64, len(att.streams))
		for i, st := range att.streams {
			p := st.progress.get()
			got[i] = p.Received
			received += p.Received
			size += max(p.Size, 0)
			last = maxTime(last, p.Last)
			switch {
			case p.Size < 0 && p.Source.Busy():
				waiting = append(waiting, fmt.Sprintf("shard %d waits for the snapshot of %s: it is busy with %s", st.Shard, st.Pod, p.Source))
			case p.Size < 0:
				waiting = append(waiting, fmt.Sprintf("shard %d waits for the snapshot of %s", st.Shard, st.Pod))
			}
		}
		msg := fmt.Sprintf("streaming the snapshots of %d shards to %s: %d of %d bytes", len(att.streams), att.where, received, size)
		if len(waiting) > 0 {
			msg += " (" + strings.Join(waiting, "; ") + ")"
		}
		if last.IsZero() || (msg == writtenMsg && last.Equal(writtenLast)) {
			continue
		}
		err := r.finishAttempt(ctx, att.key, att.uid, att.number, func(b *cachev1alpha1.CacheBackup) {
			lp := metav1.NewTime(last)
			b.Status.BytesReceived, b.Status.LastProgressTime, b.Status.Message = received, &lp, msg
			for i := range b.Status.Shards {
				if j := slices.IndexFunc(att.streams, func(st *shardStream) bool { return st.Shard == int(b.Status.Shards[i].Index) }); j >= 0 {
					b.Status.Shards[i].BytesReceived = got[j]
				}
			}
		})
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, errSuperseded) && !apierrors.IsNotFound(err) {
				ctrl.Log.WithName(ControllerName).Error(err, "Recording backup progress", "backup", att.key)
			}
			continue
		}
		writtenMsg, writtenLast = msg, last
	}
}
