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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/access"
	"github.com/cacheops/cacheops/dayTwo/backup"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// updateBackup writes a CacheBackup's status on a fresh read, retrying
// conflicts. mutate may refuse the write by returning an error.
func (r *Reconciler) updateBackup(ctx context.Context, key types.NamespacedName, mutate func(*cachev1alpha1.CacheBackup) error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b := &cachev1alpha1.CacheBackup{}
		if err := r.APIReader.Get(ctx, key, b); err != nil {
			return err
		}
		if err := mutate(b); err != nil {
			return err
		}
		return r.Client.Status().Update(ctx, b)
	})
}

// errSuperseded: the CacheBackup moved on (another attempt, or it was
// recreated) while this attempt ran; its result is not written.
var errSuperseded = errors.New("superseded by a newer attempt")

// finishAttempt writes an attempt's end (or its progress), only if the
// CacheBackup still records this attempt as running.
func (r *Reconciler) finishAttempt(ctx context.Context, key types.NamespacedName, uid types.UID, attempt int32, mutate func(*cachev1alpha1.CacheBackup)) error {
	return r.updateBackup(ctx, key, func(b *cachev1alpha1.CacheBackup) error {
		if b.UID != uid || b.Status.Attempts != attempt || b.Status.Phase != cachev1alpha1.BackupRunning {
			return errSuperseded
		}
		mutate(b)
		return nil
	})
}

// attempt is one attempt at streaming a CacheBackup's dump.
type attempt struct {
	key        types.NamespacedName // the CacheBackup
	clusterKey types.NamespacedName
	cluster    *cachev1alpha1.CacheCluster
	uid        types.UID
	number     int32
	// pod is the source, why the planner's reason for it.
	pod, why  string
	addr      string
	access    access.Config
	target    cachev1alpha1.BackupLocation
	store     *backup.Store
	objectKey string
	where     string
	start     time.Time
}

// runBackup begins one attempt: the CacheBackup turns Running and a
// goroutine streams the dump; its end is written to the CacheBackup, whose
// change wakes the cluster's reconcile.
func (r *Reconciler) runBackup(ctx context.Context, s *scope, a plan.Action) error {
	cc := s.cc
	cb, err := r.backupToRun(ctx, s)
	if cb == nil || err != nil {
		return err
	}
	name, key := cb.Name, client.ObjectKeyFromObject(cb)
	att, err := r.prepareAttempt(ctx, s, a, cb)
	if att == nil || err != nil {
		return err
	}
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	if !r.backups.add(key, cc.Name, cancel) {
		cancel(nil)
		return nil
	}
	if err := r.markRunning(ctx, att); err != nil {
		r.backups.done(key)
		cancel(nil)
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Backup started", "backup", name, "source", att.pod, "why", att.why, "attempt", att.number, "key", att.objectKey)
	r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventBackupStarted, "Backup", "Backup %s (attempt %d): streaming a snapshot of %s (%s) to %s", name, att.number, att.pod, att.why, att.where)
	go r.stream(runCtx, cancel, att)
	return nil
}

// backupToRun is the CacheBackup of the Backup operation, read from the
// API server, when another attempt may start; nil when it is gone, was
// planned on a stale copy, or has used up its attempts (it fails then).
func (r *Reconciler) backupToRun(ctx context.Context, s *scope) (*cachev1alpha1.CacheBackup, error) {
	cc := s.cc
	name := cc.Status.Operation.Backup
	key := types.NamespacedName{Namespace: cc.Namespace, Name: name}
	cb, err := r.ownBackup(ctx, cc, key)
	if cb == nil || err != nil {
		return nil, err
	}
	if s.snap.Backup != nil && cb.Status.Attempts != s.snap.Backup.Attempts {
		// Planned on a cached CacheBackup that has not seen the last
		// attempt's end yet (it looked Running and streamed by no one):
		// its retry time and stalled sources were unknown. The update's
		// event plans again on what the attempt recorded.
		ctrl.LoggerFrom(ctx).Info("Backup planned on a stale CacheBackup; planning again", "backup", name, "attempts", cb.Status.Attempts, "planned", s.snap.Backup.Attempts)
		return nil, nil
	}
	if cb.Status.Attempts >= maxBackupAttempts {
		return nil, r.failBackup(ctx, cc, key, fmt.Sprintf("gave up after %d attempts; the last: %s", cb.Status.Attempts, cb.Status.Message))
	}
	return cb, nil
}

// ownBackup reads the CacheBackup from the API server and adopts one made
// without an owner (kubectl apply), so it is part of the cluster's history
// and goes with it. nil when it is gone.
func (r *Reconciler) ownBackup(ctx context.Context, cc *cachev1alpha1.CacheCluster, key types.NamespacedName) (*cachev1alpha1.CacheBackup, error) {
	cb := &cachev1alpha1.CacheBackup{}
	if err := r.APIReader.Get(ctx, key, cb); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if metav1.IsControlledBy(cb, cc) {
		return cb, nil
	}
	patch := client.MergeFrom(cb.DeepCopy())
	if err := controllerutil.SetControllerReference(cc, cb, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Client.Patch(ctx, cb, patch); err != nil {
		return nil, err
	}
	return cb, nil
}

// failBackup ends a CacheBackup as Failed: a person must change something
// (the target, a Secret) before another backup can succeed.
func (r *Reconciler) failBackup(ctx context.Context, cc *cachev1alpha1.CacheCluster, key types.NamespacedName, msg string) error {
	r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventBackupFailed, "Backup", "Backup %s failed: %s", key.Name, msg)
	if err := r.recordFailure(ctx, client.ObjectKeyFromObject(cc), key.Name+": "+msg); err != nil {
		return err
	}
	return r.updateBackup(ctx, key, func(b *cachev1alpha1.CacheBackup) error {
		now := metav1.NewTime(r.now())
		b.Status.Phase, b.Status.Message, b.Status.CompletionTime = cachev1alpha1.BackupFailed, msg, &now
		return nil
	})
}

// prepareAttempt opens the backup target; nil (and the CacheBackup
// failed, or the attempt counted) when it cannot be opened.
func (r *Reconciler) prepareAttempt(ctx context.Context, s *scope, a plan.Action, cb *cachev1alpha1.CacheBackup) (*attempt, error) {
	cc := s.cc
	key := client.ObjectKeyFromObject(cb)
	store, target, err := r.openBackupTarget(ctx, cc, cb, func(prefix string) string {
		return backup.ObjectKey(prefix, cc.Namespace, cc.Name, cb.Name)
	})
	if store == nil || err != nil {
		return nil, err
	}
	objectKey := target.Key
	src, _ := s.snap.Pod(a.Pod)
	why, ok := strings.CutPrefix(a.Reason, "backup "+cb.Name+" from "+a.Pod+": ")
	if !ok {
		why = a.Reason
	}
	return &attempt{
		key: key, clusterKey: s.key, cluster: cc.DeepCopy(), uid: cb.UID, number: cb.Status.Attempts + 1,
		pod: a.Pod, why: why, addr: net.JoinHostPort(src.IP, "6379"), access: s.access,
		target: target, store: store, objectKey: objectKey, where: store.Where(objectKey), start: r.now(),
	}, nil
}

// openBackupTarget opens the cluster's backup target for the backup cb
// stored at keyOf(the target's prefix). A nil store means the attempt does
// not start: the CacheBackup failed (no target, a Secret a person must
// fix) or waits for its backup-store pod; an error that the step is
// retried.
func (r *Reconciler) openBackupTarget(ctx context.Context, cc *cachev1alpha1.CacheCluster, cb *cachev1alpha1.CacheBackup, keyOf func(prefix string) string) (*backup.Store, cachev1alpha1.BackupLocation, error) {
	key := client.ObjectKeyFromObject(cb)
	target := cachev1alpha1.BackupLocation{S3: cc.Spec.Backup.S3, PVC: cc.Spec.Backup.PVC}
	if target.S3 == nil && target.PVC == nil {
		return nil, target, r.failBackup(ctx, cc, key, "the cluster has no backup target: set spec.backup.s3 or spec.backup.pvc")
	}
	prefix := ""
	if target.S3 != nil {
		prefix = target.S3.Prefix
	} else {
		prefix = target.PVC.Prefix
	}
	target.Key = keyOf(prefix)
	store, err := r.openStore(ctx, cc, target, true)
	if err != nil {
		var missing *missingKeyError
		var notReady *storeNotReadyError
		switch {
		case apierrors.IsNotFound(err) || errors.As(err, &missing):
			return nil, target, r.failBackup(ctx, cc, key, err.Error())
		case errors.As(err, &notReady):
			// Waits a while for the pod, then counts as an attempt.
			return nil, target, r.failAttemptBeforeStart(ctx, cc, key, cb, err)
		}
		return nil, target, err // the API server, not the Secret: the step is retried
	}
	return store, target, nil
}

// markRunning records the attempt in the CacheBackup before it streams.
func (r *Reconciler) markRunning(ctx context.Context, att *attempt) error {
	return r.updateBackup(ctx, att.key, func(b *cachev1alpha1.CacheBackup) error {
		t := metav1.NewTime(att.start)
		b.Status.Phase, b.Status.Attempts, b.Status.SourcePod, b.Status.StartTime, b.Status.CompletionTime = cachev1alpha1.BackupRunning, att.number, att.pod, &t, nil
		b.Status.SourceReason, b.Status.BytesReceived, b.Status.LastProgressTime = att.why, 0, &t
		b.Status.Message = fmt.Sprintf("streaming a snapshot of %s to %s", att.pod, att.where)
		return nil
	})
}

// stream takes the dump and records how the attempt ended; it runs in its
// own goroutine until the dump is stored or runCtx is cancelled (a
// failover, a deleted backup, the operator stopping).
func (r *Reconciler) stream(runCtx context.Context, cancel context.CancelCauseFunc, att *attempt) {
	defer r.backups.done(att.key)
	defer cancel(nil)
	defer func() {
		if p := recover(); p != nil {
			r.backupFailed(context.Background(), att.cluster, att.key, att.uid, att.number, runCtx, fmt.Errorf("internal error: %v", p))
		}
	}()
	progress := &progressReport{}
	reported := make(chan struct{})
	reportCtx, stopReports := context.WithCancel(runCtx)
	go func() {
		defer close(reported)
		r.reportProgress(reportCtx, att.key, att.uid, att.number, att.pod, att.where, progress)
	}()
	res, err := backup.Take(runCtx, backup.Source{Addr: att.addr, Access: att.access, Timeout: 30 * time.Second,
		StallTimeout: r.BackupStallTimeout, OnProgress: progress.set},
		func(ctx context.Context, rd io.Reader, size int64) error {
			return att.store.Put(ctx, att.objectKey, rd, size)
		})
	stopReports()
	<-reported
	end := r.now()
	if err == nil {
		err = att.store.PutMetadata(runCtx, att.objectKey, att.metadata(res, end))
	}
	bg := context.Background()
	var stall *backup.StallError
	switch {
	case errors.As(err, &stall):
		r.backupStalled(bg, att.cluster, att.key, att.uid, att.number, att.pod, stall)
	case err != nil:
		r.backupFailed(bg, att.cluster, att.key, att.uid, att.number, runCtx, err)
	default:
		r.backupCompleted(bg, att, res, end)
	}
}

func (att *attempt) metadata(res backup.Result, end time.Time) backup.Metadata {
	md := res.Metadata(att.pod, att.start, end)
	md.Cluster, md.Namespace, md.Backup = att.cluster.Name, att.cluster.Namespace, att.key.Name
	return md
}

// backupCompleted records a stored dump: the CacheBackup, the metrics, the
// cluster's last success, then the retention.
func (r *Reconciler) backupCompleted(ctx context.Context, att *attempt, res backup.Result, end time.Time) {
	log := ctrl.Log.WithName(ControllerName)
	took := end.Sub(att.start).Round(time.Millisecond)
	if uerr := r.finishAttempt(ctx, att.key, att.uid, att.number, func(b *cachev1alpha1.CacheBackup) {
		t := metav1.NewTime(end)
		b.Status.Phase, b.Status.Message, b.Status.CompletionTime = cachev1alpha1.BackupCompleted, "", &t
		if res.HeaderErr != nil {
			b.Status.Message = "stored; the key count is unknown: " + res.HeaderErr.Error()
		}
		b.Status.Location = att.target.DeepCopy()
		b.Status.Size, b.Status.Checksum = res.Size, res.Checksum
		b.Status.BytesReceived, b.Status.LastProgressTime = res.Size, &t
		b.Status.RedisVersion, b.Status.ReplicationOffset = res.Header.RedisVersion, res.Header.ReplicationOffset
		b.Status.RDBVersion = int32(res.Header.RDBVersion)
		b.Status.Keys, b.Status.ExpiringKeys = res.Header.Keys, res.Header.ExpiringKeys
	}); uerr != nil {
		if !errors.Is(uerr, errSuperseded) {
			log.Error(uerr, "Recording a completed backup", "backup", att.key)
		}
		return
	}
	ck := att.clusterKey
	log.Info("Backup completed", "backup", att.key, "bytes", res.Size, "keys", res.Header.Keys, "duration", took.String())
	r.Recorder.Eventf(att.cluster, nil, corev1.EventTypeNormal, cachev1alpha1.EventBackupCompleted, "Backup",
		"Backup %s: %d keys, %d bytes from %s in %s (%s)", att.key.Name, res.Header.Keys, res.Size, att.pod, took, res.Checksum)
	backupDuration.WithLabelValues(ck.Namespace, ck.Name).Observe(took.Seconds())
	backupSize.WithLabelValues(ck.Namespace, ck.Name).Set(float64(res.Size))
	backupLastSuccess.WithLabelValues(ck.Namespace, ck.Name).Set(float64(end.Unix()))
	if err := r.recordSuccess(ctx, ck, att.key.Name, end, fmt.Sprintf("%s completed at %s: %d keys, %d bytes, %s",
		att.key.Name, end.UTC().Format(time.RFC3339), res.Header.Keys, res.Size, att.where)); err != nil {
		log.Error(err, "Recording the last successful backup", "cluster", ck)
	}
	if err := r.applyRetention(ctx, ck); err != nil {
		log.Error(err, "Applying backup retention", "cluster", ck)
	}
}

// progressWriteEvery bounds how often a running attempt's progress is
// written to its CacheBackup: every status write wakes Argo CD (it watches
// the cluster's children), and a person or a script reading the status
// needs to see that bytes move, not each of them. Half the default stall
// timeout: a stalled attempt shows its stale lastProgressTime at least
// once before it is aborted, and a 1 GiB dump (20 s here) writes none.
const progressWriteEvery = 30 * time.Second

// progressReport is the latest progress of an attempt, set by its
// watchdog.
type progressReport struct {
	mu sync.Mutex
	p  backup.Progress
}

func (p *progressReport) set(v backup.Progress) {
	p.mu.Lock()
	p.p = v
	p.mu.Unlock()
}

func (p *progressReport) get() backup.Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.p
}

// reportProgress writes an attempt's progress to its CacheBackup every
// progressWriteEvery while it changes, until ctx ends.
func (r *Reconciler) reportProgress(ctx context.Context, key types.NamespacedName, uid types.UID, attempt int32, pod, where string, progress *progressReport) {
	t := time.NewTicker(progressWriteEvery)
	defer t.Stop()
	var written backup.Progress
	var writtenMsg string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p := progress.get()
		msg := fmt.Sprintf("streaming a snapshot of %s to %s: %d of %d bytes", pod, where, p.Received, p.Size)
		switch {
		case p.Size < 0 && p.Source.Busy():
			msg = fmt.Sprintf("waiting for the snapshot of %s: it is busy with %s", pod, p.Source)
		case p.Size < 0:
			msg = fmt.Sprintf("waiting for the snapshot of %s", pod)
		}
		if p.Last.IsZero() || (p.Received == written.Received && p.Last.Equal(written.Last) && msg == writtenMsg) {
			continue
		}
		err := r.finishAttempt(ctx, key, uid, attempt, func(b *cachev1alpha1.CacheBackup) {
			last := metav1.NewTime(p.Last)
			b.Status.BytesReceived, b.Status.LastProgressTime, b.Status.Message = p.Received, &last, msg
		})
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, errSuperseded) && !apierrors.IsNotFound(err) {
				ctrl.Log.WithName(ControllerName).Error(err, "Recording backup progress", "backup", key)
			}
			continue
		}
		written, writtenMsg = p, msg
	}
}

// backupStalled records an attempt given up for making no progress: an
// abort that counts as an attempt, retried (from another in-sync replica
// when there is one: the planner passes over the pods that stalled) until
// the attempts run out.
func (r *Reconciler) backupStalled(ctx context.Context, cc *cachev1alpha1.CacheCluster, key types.NamespacedName, uid types.UID, attempt int32, pod string, stall *backup.StallError) {
	log := ctrl.Log.WithName(ControllerName)
	msg := fmt.Sprintf("attempt %d aborted: no progress for %s: %s; retried, from another in-sync replica if there is one", attempt, stall.Timeout, stall.Why(pod))
	log.Info("Backup attempt stalled", "backup", key, "attempt", attempt, "source", pod, "error", msg)
	r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventBackupAborted, "Backup", "Backup %s: %s", key.Name, msg)
	if uerr := r.finishAttempt(ctx, key, uid, attempt, func(b *cachev1alpha1.CacheBackup) {
		t := metav1.NewTime(r.now())
		b.Status.Phase, b.Status.Message, b.Status.CompletionTime = cachev1alpha1.BackupPending, msg, &t
		last := metav1.NewTime(stall.Progress.Last)
		b.Status.BytesReceived, b.Status.LastProgressTime = stall.Progress.Received, &last
		if !slices.Contains(b.Status.StalledSources, pod) && len(b.Status.StalledSources) < 16 {
			b.Status.StalledSources = append(b.Status.StalledSources, pod)
		}
	}); uerr != nil && !apierrors.IsNotFound(uerr) && !errors.Is(uerr, errSuperseded) {
		log.Error(uerr, "Recording a stalled backup", "backup", key)
	}
}

// backupFailed records a failed or aborted attempt: Pending again (it is
// retried) until the attempts run out.
func (r *Reconciler) backupFailed(ctx context.Context, cc *cachev1alpha1.CacheCluster, key types.NamespacedName, uid types.UID, attempt int32, runCtx context.Context, err error) {
	log := ctrl.Log.WithName(ControllerName)
	aborted := errors.Is(context.Cause(runCtx), errFailover) || errors.Is(context.Cause(runCtx), errRestore)
	phase, msg := cachev1alpha1.BackupPending, fmt.Sprintf("attempt %d failed: %v; retried", attempt, err)
	if aborted {
		msg = fmt.Sprintf("attempt %d aborted: %v; taken again after it", attempt, context.Cause(runCtx))
	} else if attempt >= maxBackupAttempts {
		phase, msg = cachev1alpha1.BackupFailed, fmt.Sprintf("attempt %d failed: %v; giving up", attempt, err)
	}
	log.Info("Backup attempt did not complete", "backup", key, "attempt", attempt, "aborted", aborted, "error", err.Error())
	switch {
	case aborted:
		r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventBackupAborted, "Backup", "Backup %s: %s", key.Name, msg)
	case phase == cachev1alpha1.BackupFailed:
		r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventBackupFailed, "Backup", "Backup %s: %s", key.Name, msg)
	}
	if uerr := r.finishAttempt(ctx, key, uid, attempt, func(b *cachev1alpha1.CacheBackup) {
		t := metav1.NewTime(r.now())
		b.Status.Phase, b.Status.Message, b.Status.CompletionTime = phase, msg, &t
	}); uerr != nil && !apierrors.IsNotFound(uerr) && !errors.Is(uerr, errSuperseded) {
		log.Error(uerr, "Recording a failed backup", "backup", key)
	}
	if !aborted {
		if err := r.recordFailure(ctx, client.ObjectKeyFromObject(cc), key.Name+": "+msg); err != nil {
			log.Error(err, "Recording LastBackupSucceeded", "cluster", client.ObjectKeyFromObject(cc))
		}
	}
	if phase == cachev1alpha1.BackupFailed {
		if err := r.applyRetention(ctx, client.ObjectKeyFromObject(cc)); err != nil {
			log.Error(err, "Applying backup retention", "cluster", client.ObjectKeyFromObject(cc))
		}
	}
}

// recordSuccess notes the newest completed backup in the cluster's status.
func (r *Reconciler) recordSuccess(ctx context.Context, clusterKey types.NamespacedName, name string, at time.Time, msg string) error {
	return r.patchFreshStatus(ctx, clusterKey, func(cc *cachev1alpha1.CacheCluster, st *cachev1alpha1.CacheClusterStatus) {
		b := &cachev1alpha1.BackupStatus{}
		if st.Backup != nil {
			b = st.Backup.DeepCopy()
		}
		t := metav1.NewTime(at)
		b.LastSuccessfulBackup, b.LastSuccessfulTime = name, &t
		st.Backup = b
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: cachev1alpha1.ConditionLastBackupSucceeded, Status: metav1.ConditionTrue,
			Reason: cachev1alpha1.ReasonBackupSucceeded, Message: msg, ObservedGeneration: cc.Generation,
		})
	})
}

// recordFailure sets LastBackupSucceeded=False: the cluster keeps serving,
// and the condition says why its backups do not.
func (r *Reconciler) recordFailure(ctx context.Context, clusterKey types.NamespacedName, msg string) error {
	return r.patchFreshStatus(ctx, clusterKey, func(cc *cachev1alpha1.CacheCluster, st *cachev1alpha1.CacheClusterStatus) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: cachev1alpha1.ConditionLastBackupSucceeded, Status: metav1.ConditionFalse,
			Reason: cachev1alpha1.ReasonBackupFailed, Message: msg, ObservedGeneration: cc.Generation,
		})
	})
}
