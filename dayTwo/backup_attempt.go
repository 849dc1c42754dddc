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

// startBackup begins one attempt: the CacheBackup turns Running and a
// goroutine streams the dump; its end is written to the CacheBackup, whose
// change wakes the cluster's reconcile.
func (r *Reconciler) runBackup(ctx context.Context, s *scope, a plan.Action) error {
	cc, snap, pw := s.cc, s.snap, s.password
	log := ctrl.LoggerFrom(ctx)
	name := cc.Status.Operation.Backup
	key := types.NamespacedName{Namespace: cc.Namespace, Name: name}
	cb := &cachev1alpha1.CacheBackup{}
	if err := r.APIReader.Get(ctx, key, cb); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(cb, cc) {
		// Adopt a CacheBackup made without an owner (kubectl apply), so it
		// is part of the cluster's history and goes with it.
		patch := client.MergeFrom(cb.DeepCopy())
		if err := controllerutil.SetControllerReference(cc, cb, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Patch(ctx, cb, patch); err != nil {
			return err
		}
	}
	fail := func(msg string) error {
		r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventBackupFailed, "Backup", "Backup %s failed: %s", name, msg)
		if err := r.recordFailure(ctx, client.ObjectKeyFromObject(cc), name+": "+msg); err != nil {
			return err
		}
		return r.updateBackup(ctx, key, func(b *cachev1alpha1.CacheBackup) error {
			now := metav1.NewTime(r.now())
			b.Status.Phase, b.Status.Message, b.Status.CompletionTime = cachev1alpha1.BackupFailed, msg, &now
			return nil
		})
	}
	if snap.Backup != nil && cb.Status.Attempts != snap.Backup.Attempts {
		// Planned on a cached CacheBackup that has not seen the last
		// attempt's end yet (it looked Running and streamed by no one):
		// its retry time and stalled sources were unknown. The update's
		// event plans again on what the attempt recorded.
		ctrl.LoggerFrom(ctx).Info("Backup planned on a stale CacheBackup; planning again", "backup", name, "attempts", cb.Status.Attempts, "planned", snap.Backup.Attempts)
		return nil
	}
	if cb.Status.Attempts >= maxBackupAttempts {
		return fail(fmt.Sprintf("gave up after %d attempts; the last: %s", cb.Status.Attempts, cb.Status.Message))
	}
	target := cachev1alpha1.BackupLocation{S3: cc.Spec.Backup.S3, PVC: cc.Spec.Backup.PVC}
	if target.S3 == nil && target.PVC == nil {
		return fail("the cluster has no backup target: set spec.backup.s3 or spec.backup.pvc")
	}
	prefix := ""
	if target.S3 != nil {
		prefix = target.S3.Prefix
	} else {
		prefix = target.PVC.Prefix
	}
	objectKey := backup.ObjectKey(prefix, cc.Namespace, cc.Name, name)
	target.Key = objectKey
	store, err := r.openStore(ctx, cc, target, true)
	if err != nil {
		var missing *missingKeyError
		var notReady *storeNotReadyError
		if apierrors.IsNotFound(err) || errors.As(err, &missing) {
			return fail(err.Error())
		}
		if errors.As(err, &notReady) {
			// Waits a while for the pod, then counts as an attempt.
			return r.failAttemptBeforeStart(ctx, cc, key, cb, err)
		}
		return err // the API server, not the Secret: the step is retried
	}
	src, _ := snap.Pod(a.Pod)
	where := store.Where(objectKey)
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	if !r.backups.add(key, cc.Name, cancel) {
		cancel(nil)
		return nil
	}
	start := r.now()
	attempt := cb.Status.Attempts + 1
	why, ok := strings.CutPrefix(a.Reason, "backup "+name+" from "+a.Pod+": ")
	if !ok {
		why = a.Reason
	}
	if err := r.updateBackup(ctx, key, func(b *cachev1alpha1.CacheBackup) error {
		t := metav1.NewTime(start)
		b.Status.Phase, b.Status.Attempts, b.Status.SourcePod, b.Status.StartTime, b.Status.CompletionTime = cachev1alpha1.BackupRunning, attempt, a.Pod, &t, nil
		b.Status.SourceReason, b.Status.BytesReceived, b.Status.LastProgressTime = why, 0, &t
		b.Status.Message = fmt.Sprintf("streaming a snapshot of %s to %s", a.Pod, where)
		return nil
	}); err != nil {
		r.backups.done(key)
		cancel(nil)
		return err
	}
	log.Info("Backup started", "backup", name, "source", a.Pod, "why", why, "attempt", attempt, "key", objectKey)
	r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventBackupStarted, "Backup", "Backup %s (attempt %d): streaming a snapshot of %s (%s) to %s", name, attempt, a.Pod, why, where)

	clusterKey := client.ObjectKeyFromObject(cc)
	ref := cc.DeepCopy()
	uid := cb.UID
	go func() {
		defer r.backups.done(key)
		defer cancel(nil)
		defer func() {
			if p := recover(); p != nil {
				r.backupFailed(context.Background(), ref, key, uid, attempt, runCtx, fmt.Errorf("internal error: %v", p))
			}
		}()
		progress := &progressReport{}
		reported := make(chan struct{})
		reportCtx, stopReports := context.WithCancel(runCtx)
		go func() {
			defer close(reported)
			r.reportProgress(reportCtx, key, uid, attempt, a.Pod, where, progress)
		}()
		res, err := backup.Take(runCtx, backup.Source{Addr: net.JoinHostPort(src.IP, "6379"), Password: pw, Timeout: 30 * time.Second,
			StallTimeout: r.BackupStallTimeout, OnProgress: progress.set},
			func(ctx context.Context, rd io.Reader, size int64) error { return store.Put(ctx, objectKey, rd, size) })
		stopReports()
		<-reported
		end := r.now()
		if err == nil {
			err = store.PutMetadata(runCtx, objectKey, backup.Metadata{
				Cluster: cc.Name, Namespace: cc.Namespace, Backup: name, SourcePod: a.Pod,
				RedisVersion: res.Header.RedisVersion, RDBVersion: res.Header.RDBVersion, ReplicationOffset: res.Header.ReplicationOffset,
				DB: res.Header.DB, Keys: res.Header.Keys, ExpiringKeys: res.Header.ExpiringKeys,
				Size: res.Size, Checksum: res.Checksum, StartTime: start.UTC(), EndTime: end.UTC(),
			})
		}
		bg := context.Background()
		if err != nil {
			var stall *backup.StallError
			if errors.As(err, &stall) {
				r.backupStalled(bg, ref, key, uid, attempt, a.Pod, stall)
				return
			}
			r.backupFailed(bg, ref, key, uid, attempt, runCtx, err)
			return
		}
		took := end.Sub(start).Round(time.Millisecond)
		if uerr := r.finishAttempt(bg, key, uid, attempt, func(b *cachev1alpha1.CacheBackup) {
			t := metav1.NewTime(end)
			b.Status.Phase, b.Status.Message, b.Status.CompletionTime = cachev1alpha1.BackupCompleted, "", &t
			if res.HeaderErr != nil {
				b.Status.Message = "stored; the key count is unknown: " + res.HeaderErr.Error()
			}
			b.Status.Location = target.DeepCopy()
			b.Status.Size, b.Status.Checksum = res.Size, res.Checksum
			b.Status.BytesReceived, b.Status.LastProgressTime = res.Size, &t
			b.Status.RedisVersion, b.Status.ReplicationOffset = res.Header.RedisVersion, res.Header.ReplicationOffset
			b.Status.Keys, b.Status.ExpiringKeys = res.Header.Keys, res.Header.ExpiringKeys
		}); uerr != nil {
			if !errors.Is(uerr, errSuperseded) {
				ctrl.Log.WithName(ControllerName).Error(uerr, "Recording a completed backup", "backup", key)
			}
			return
		}
		ctrl.Log.WithName(ControllerName).Info("Backup completed", "backup", key, "bytes", res.Size, "keys", res.Header.Keys, "duration", took.String())
		r.Recorder.Eventf(ref, nil, corev1.EventTypeNormal, cachev1alpha1.EventBackupCompleted, "Backup",
			"Backup %s: %d keys, %d bytes from %s in %s (%s)", name, res.Header.Keys, res.Size, a.Pod, took, res.Checksum)
		backupDuration.WithLabelValues(clusterKey.Namespace, clusterKey.Name).Observe(took.Seconds())
		backupSize.WithLabelValues(clusterKey.Namespace, clusterKey.Name).Set(float64(res.Size))
		backupLastSuccess.WithLabelValues(clusterKey.Namespace, clusterKey.Name).Set(float64(end.Unix()))
		if err := r.recordSuccess(bg, clusterKey, name, end, fmt.Sprintf("%s completed at %s: %d keys, %d bytes, %s",
			name, end.UTC().Format(time.RFC3339), res.Header.Keys, res.Size, where)); err != nil {
			ctrl.Log.WithName(ControllerName).Error(err, "Recording the last successful backup", "cluster", clusterKey)
		}
		if err := r.applyRetention(bg, clusterKey); err != nil {
			ctrl.Log.WithName(ControllerName).Error(err, "Applying backup retention", "cluster", clusterKey)
		}
	}()
	return nil
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
