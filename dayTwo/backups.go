package daytwo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/backup"
	"github.com/cacheops/cacheops/renderer"
)

const (
	// ActionRunBackup starts streaming a dump of Pod to the backup target.
	ActionRunBackup ActionType = "RunBackup"
	// ActionVerifyRestore compares the restored master's keys with the
	// backup's metadata and records the Restored condition.
	ActionVerifyRestore ActionType = "VerifyRestore"
)

// verifyRetryFor is how long errors reading a restored backup's metadata
// are retried before the restore is recorded as unverified (the master
// label, and so client traffic, waits meanwhile).
const verifyRetryFor = 2 * time.Minute

const (
	// maxBackupAttempts bounds the starts of one CacheBackup; aborts by a
	// failover or an operator restart count too.
	maxBackupAttempts = 5
	// backupRetryDelay is the pause after a failed attempt, times the
	// attempts so far.
	backupRetryDelay = 5 * time.Second
	// LabelScheduled marks CacheBackups the schedule created.
	LabelScheduled = "cache.cacheops.io/scheduled"
)

// errFailover is why a failover aborts a backup.
var errFailover = errors.New("a failover started")

// BackupState is the CacheBackup a Backup operation takes, as the planner
// sees it.
type BackupState struct {
	Name   string
	Exists bool
	Phase  cachev1alpha1.BackupPhase
	// Running: this process streams it now.
	Running bool
	// RetryAt is when a failed attempt may be repeated.
	RetryAt time.Time
	// Stalled are the pods an earlier attempt stalled on.
	Stalled []string
	// Attempts is the number of attempts the plan was made on.
	Attempts int32
}

// planBackup continues a Backup operation: stream from the in-sync replica
// with the most data (the master only when it is alone), wait while the
// stream runs, end the operation when the CacheBackup is done or gone.
func planBackup(s Snapshot) Action {
	b := s.Backup
	switch {
	case b == nil || !b.Exists:
		return Action{Type: ActionCompleteOperation, Reason: "the CacheBackup was deleted"}
	case b.Phase == cachev1alpha1.BackupCompleted || b.Phase == cachev1alpha1.BackupFailed:
		return Action{Type: ActionCompleteOperation, Reason: "backup " + b.Name + " " + strings.ToLower(string(b.Phase))}
	case b.Running:
		return Action{Type: ActionWait, Reason: "backup " + b.Name + " is streaming"}
	}
	// Not streaming: a change from git goes first (it may be what the
	// backup waits for, e.g. a fix for a replica that cannot start); the
	// backup stays Pending and runs after it.
	if s.Approved != nil {
		if next := nextChange(s); next.Type == ActionStartOperation {
			return Action{Type: ActionCompleteOperation, Reason: "backup " + b.Name + " waits for " + next.Reason}
		}
	}
	if s.Now.Before(b.RetryAt) {
		return Action{Type: ActionWait, Reason: "backup " + b.Name + " is retried at " + b.RetryAt.Format(time.RFC3339)}
	}
	master, _ := s.pod(s.CurrentMaster)
	var live int
	for _, p := range s.Pods {
		if !p.Deleting {
			live++
		}
	}
	source, why := "", ""
	if live == 1 {
		source, why = master.Name, "the only pod"
	} else {
		source, why = backupSource(s, master, b.Stalled)
	}
	if source == "" {
		return Action{Type: ActionWait, Reason: "backup " + b.Name + " waits for a replica that is ready and in sync"}
	}
	return Action{Type: ActionRunBackup, Pod: source, Reason: "backup " + b.Name + " from " + source + ": " + why}
}

// backupSource chooses the replica a dump is taken from, and says why: an
// in-sync replica that can serve now (no background save or AOF rewrite
// in progress: a SYNC waits for those) and did not stall an earlier
// attempt of this backup; among equals, the most data, then the lowest
// ordinal. A busy or stalled replica is chosen only when no other is in
// sync; the stall timeout then bounds the wait.
func backupSource(s Snapshot, master PodState, stalled []string) (string, string) {
	var cands []PodState
	for _, p := range s.Pods {
		if p.Name != master.Name && !p.Deleting && inSync(p, master) {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return "", ""
	}
	busy := func(p PodState) bool { return p.Obs.Saving || p.Obs.Rewriting }
	stall := func(p PodState) bool { return slices.Contains(stalled, p.Name) }
	rank := func(p PodState) int {
		r := 0
		if busy(p) {
			r += 2
		}
		if stall(p) {
			r++
		}
		return r
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if ri, rj := rank(cands[i]), rank(cands[j]); ri != rj {
			return ri < rj
		}
		if cands[i].Obs.Offset != cands[j].Obs.Offset {
			return cands[i].Obs.Offset > cands[j].Obs.Offset
		}
		return cands[i].Ordinal() < cands[j].Ordinal()
	})
	best := cands[0]
	var passed []string
	for _, p := range cands[1:] {
		if rank(p) > rank(best) {
			passed = append(passed, p.Name+" "+describeSourceState(p, stall(p)))
		}
	}
	var why string
	switch {
	case busy(best) && len(cands) == 1:
		why = "the only in-sync replica, although it " + describeSourceState(best, stall(best))
	case busy(best):
		var all []string
		for _, p := range cands {
			all = append(all, p.Name+" "+describeSourceState(p, stall(p)))
		}
		why = "every in-sync replica is busy (" + strings.Join(all, "; ") + "); " + best.Name + " ranks first"
	case stall(best) && len(cands) == 1:
		why = "the only in-sync replica, although it stalled an earlier attempt; it is idle now"
	case stall(best):
		why = "idle now, although it stalled an earlier attempt (" + strings.Join(passed, "; ") + ")"
	case len(passed) > 0:
		why = "in sync and idle (" + strings.Join(passed, "; ") + ")"
	case len(cands) > 1:
		why = "in sync and idle, with the most data"
	default:
		why = "the only in-sync replica, idle"
	}
	return best.Name, why
}

// describeSourceState says why a replica is a poor source now.
func describeSourceState(p PodState, stalled bool) string {
	var parts []string
	switch {
	case p.Obs.Saving && p.Obs.Rewriting:
		parts = append(parts, "is busy with a background save and an AOF rewrite")
	case p.Obs.Saving:
		parts = append(parts, "is busy with a background save")
	case p.Obs.Rewriting:
		parts = append(parts, "is busy with an AOF rewrite")
	}
	if stalled {
		parts = append(parts, "stalled an earlier attempt")
	}
	if len(parts) == 0 {
		return "is idle"
	}
	return strings.Join(parts, " and ")
}

// backupRuns tracks the dumps this process streams, so a failover can abort
// one and a restarted operator knows none runs.
type backupRuns struct {
	mu   sync.Mutex
	runs map[types.NamespacedName]backupRun // by CacheBackup
	wg   sync.WaitGroup
}

type backupRun struct {
	cluster string
	cancel  context.CancelCauseFunc
}

func (b *backupRuns) running(key types.NamespacedName) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.runs[key]
	return ok
}

// add records a run; false when one runs for the CacheBackup already.
func (b *backupRuns) add(key types.NamespacedName, cluster string, cancel context.CancelCauseFunc) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.runs[key]; ok {
		return false
	}
	if b.runs == nil {
		b.runs = map[types.NamespacedName]backupRun{}
	}
	b.runs[key] = backupRun{cluster: cluster, cancel: cancel}
	b.wg.Add(1)
	return true
}

func (b *backupRuns) done(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.runs, key)
	b.wg.Done()
}

// cancel cancels the runs that match.
func (b *backupRuns) cancel(match func(types.NamespacedName, backupRun) bool, cause error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for key, run := range b.runs {
		if match(key, run) {
			run.cancel(cause)
		}
	}
}

// abortOne cancels the run of one CacheBackup.
func (b *backupRuns) abortOne(backup types.NamespacedName, cause error) {
	b.cancel(func(key types.NamespacedName, _ backupRun) bool { return key == backup }, cause)
}

// abort cancels the runs of a cluster.
func (b *backupRuns) abort(cluster types.NamespacedName, cause error) {
	b.cancel(func(key types.NamespacedName, run backupRun) bool {
		return key.Namespace == cluster.Namespace && run.cluster == cluster.Name
	}, cause)
}

// Start waits for the manager to stop, then cancels every run and waits
// (10 s at most) for them to record their end, so a new leader does not
// start a second attempt while this one still uploads.
func (b *backupRuns) Start(ctx context.Context) error {
	<-ctx.Done()
	b.cancel(func(types.NamespacedName, backupRun) bool { return true }, errors.New("the operator is stopping"))
	ended := make(chan struct{})
	go func() { b.wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
	}
	return nil
}

// NeedLeaderElection: the runs belong to the leader.
func (b *backupRuns) NeedLeaderElection() bool { return true }

// clusterBackups lists the CacheBackups of a cluster.
func (r *Reconciler) clusterBackups(ctx context.Context, cc *cachev1alpha1.CacheCluster) ([]cachev1alpha1.CacheBackup, error) {
	list := &cachev1alpha1.CacheBackupList{}
	if err := r.Client.List(ctx, list, client.InNamespace(cc.Namespace)); err != nil {
		return nil, err
	}
	var out []cachev1alpha1.CacheBackup
	for _, b := range list.Items {
		if b.Spec.Cluster == cc.Name && b.DeletionTimestamp.IsZero() {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreationTimestamp.Equal(&out[j].CreationTimestamp) {
			return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// observeBackups fills the snapshot's view of the cluster's backups.
func (r *Reconciler) observeBackups(cc *cachev1alpha1.CacheCluster, backups []cachev1alpha1.CacheBackup, snap *Snapshot) {
	opBackup := ""
	if op := cc.Status.Operation; op != nil && op.Type == cachev1alpha1.OperationBackup {
		opBackup = op.Backup
		snap.Backup = &BackupState{Name: op.Backup}
	}
	defer func() {
		if st := snap.Backup; st != nil && !st.Exists {
			r.backups.abortOne(types.NamespacedName{Namespace: cc.Namespace, Name: st.Name}, errors.New("the CacheBackup was deleted"))
		}
	}()
	for _, b := range backups {
		if b.Name == opBackup {
			st := snap.Backup
			st.Exists, st.Phase, st.Stalled, st.Attempts = true, b.Status.Phase, b.Status.StalledSources, b.Status.Attempts
			st.Running = r.backups.running(client.ObjectKeyFromObject(&b))
			if b.Status.Phase == cachev1alpha1.BackupPending && b.Status.CompletionTime != nil {
				st.RetryAt = b.Status.CompletionTime.Add(time.Duration(max(b.Status.Attempts, 1)) * backupRetryDelay)
			}
			continue
		}
		// Running but not the operation's and streamed by no one: an
		// attempt a failover pre-empted while no operator was there to
		// record the abort. It waits for its turn again.
		orphaned := b.Status.Phase == cachev1alpha1.BackupRunning && !r.backups.running(client.ObjectKeyFromObject(&b))
		if snap.PendingBackup == "" && (b.Status.Phase == "" || b.Status.Phase == cachev1alpha1.BackupPending || orphaned) {
			snap.PendingBackup = b.Name
		}
	}
}

// s3Target reads the credentials (and CA) of a bucket from the cluster's
// namespace. The Secrets are the user's, outside the label-filtered cache.
func (r *Reconciler) s3Target(ctx context.Context, ns string, t cachev1alpha1.S3Target) (backup.Target, error) {
	out := backup.Target{Endpoint: t.Endpoint, Bucket: t.Bucket, Prefix: t.Prefix, Region: t.Region, Insecure: t.Insecure}
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.CredentialsSecret}, s); err != nil {
		return out, fmt.Errorf("S3 credentials Secret %s: %w", t.CredentialsSecret, err)
	}
	out.AccessKeyID, out.SecretAccessKey = string(s.Data["accessKeyID"]), string(s.Data["secretAccessKey"])
	if out.AccessKeyID == "" || out.SecretAccessKey == "" {
		return out, &missingKeyError{fmt.Sprintf("S3 credentials Secret %s needs the keys accessKeyID and secretAccessKey", t.CredentialsSecret)}
	}
	if t.CASecret != "" {
		ca := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.CASecret}, ca); err != nil {
			return out, fmt.Errorf("S3 CA Secret %s: %w", t.CASecret, err)
		}
		if out.CA = ca.Data["ca.crt"]; len(out.CA) == 0 {
			return out, &missingKeyError{fmt.Sprintf("S3 CA Secret %s has no key ca.crt", t.CASecret)}
		}
	}
	return out, nil
}

// missingKeyError: a Secret exists but lacks a key; a person must fix it.
type missingKeyError struct{ msg string }

func (e *missingKeyError) Error() string { return e.msg }

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
func (r *Reconciler) startBackup(ctx context.Context, cc *cachev1alpha1.CacheCluster, snap Snapshot, a Action, pw string) error {
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
	src, _ := snap.pod(a.Pod)
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

// patchFreshStatus patches a cluster's status from outside its reconcile
// (a backup's goroutine): on a fresh read, retrying conflicts.
func (r *Reconciler) patchFreshStatus(ctx context.Context, key types.NamespacedName, mutate func(*cachev1alpha1.CacheCluster, *cachev1alpha1.CacheClusterStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cc := &cachev1alpha1.CacheCluster{}
		if err := r.APIReader.Get(ctx, key, cc); err != nil {
			return client.IgnoreNotFound(err)
		}
		return r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) { mutate(cc, st) })
	})
}

// applyRetention removes the completed backups beyond spec.backup.retention
// (count, age), stored dump first, then its CacheBackup. The newest
// completed backup always stays.
func (r *Reconciler) applyRetention(ctx context.Context, clusterKey types.NamespacedName) error {
	cc := &cachev1alpha1.CacheCluster{}
	if err := r.APIReader.Get(ctx, clusterKey, cc); err != nil {
		return client.IgnoreNotFound(err)
	}
	ret := cc.Spec.Backup.Retention
	if ret == nil || meta.IsStatusConditionTrue(cc.Status.Conditions, cachev1alpha1.ConditionDataLost) {
		// While the data is lost, the backups from before the loss are
		// what a restore needs: none is removed.
		return nil
	}
	// maxAge 0 keeps backups of any age. An admitted value always parses;
	// one that does not (written under an older schema) only turns the age
	// rule off, the count rule still applies.
	var maxAge time.Duration
	if ret.MaxAge != nil {
		d, err := ret.MaxAge.Parse()
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("Ignoring backup.retention.maxAge", "error", err.Error())
		}
		maxAge = d
	}
	tooOld := func(b cachev1alpha1.CacheBackup) bool {
		return maxAge > 0 && r.now().Sub(b.Status.CompletionTime.Time) > maxAge
	}
	backups, err := r.clusterBackups(ctx, cc)
	if err != nil {
		return err
	}
	var done, failed []cachev1alpha1.CacheBackup
	for _, b := range backups {
		switch {
		case b.Status.CompletionTime == nil:
		case b.Status.Phase == cachev1alpha1.BackupCompleted && b.Status.Location != nil:
			done = append(done, b)
		case b.Status.Phase == cachev1alpha1.BackupFailed:
			failed = append(failed, b)
		}
	}
	newestFirst := func(l []cachev1alpha1.CacheBackup) {
		sort.Slice(l, func(i, j int) bool { return l[j].Status.CompletionTime.Before(l[i].Status.CompletionTime) })
	}
	newestFirst(done)
	newestFirst(failed)
	var errs []error
	// Failed backups stored nothing; the same rules bound their records.
	for i, b := range failed {
		if (ret.Count != nil && i >= int(*ret.Count)) || tooOld(b) {
			if err := r.Client.Delete(ctx, &b); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	for i, b := range done {
		if i == 0 {
			continue // the last successful backup is never removed
		}
		byCount := ret.Count != nil && i >= int(*ret.Count)
		byAge := tooOld(b)
		if !byCount && !byAge {
			continue
		}
		if pvc := b.Status.Location.PVC; pvc != nil && (cc.Spec.Backup.PVC == nil || cc.Spec.Backup.PVC.ClaimName != pvc.ClaimName ||
			!strings.HasPrefix(b.Status.Location.Key, renderer.ClaimFolder(cc))) {
			// On a claim, or in a folder (the prefix changed), the cluster
			// no longer backs up to: its store pod does not serve it, so
			// the file and its record stay (delete the CacheBackup by
			// hand; the file stays on the claim).
			continue
		}
		why := fmt.Sprintf("retention keeps %d", ptrOr(ret.Count, 0))
		if byAge {
			why = "older than " + string(*ret.MaxAge)
		}
		if err := r.deleteStored(ctx, cc, *b.Status.Location); err != nil {
			errs = append(errs, fmt.Errorf("backup %s: %w", b.Name, err))
			continue
		}
		if err := r.Client.Delete(ctx, &b); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventBackupPruned, "Retention", "Removed backup %s and %s (%s)", b.Name, b.Status.Location, why)
	}
	return errors.Join(errs...)
}

func (r *Reconciler) deleteStored(ctx context.Context, cc *cachev1alpha1.CacheCluster, loc cachev1alpha1.BackupLocation) error {
	store, err := r.openStore(ctx, cc, loc, true)
	if err != nil {
		return err
	}
	return store.Delete(ctx, loc.Key)
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// schedule creates the CacheBackup the schedule asks for, once per due
// time (after an outage, one for the latest missed time), and tells when
// the next is due.
func (r *Reconciler) schedule(ctx context.Context, cc *cachev1alpha1.CacheCluster, backups []cachev1alpha1.CacheBackup) (time.Duration, error) {
	bs := cc.Spec.Backup
	if !bs.Enabled || (bs.S3 == nil && bs.PVC == nil) {
		labels := prometheus.Labels{"namespace": cc.Namespace, "cluster": cc.Name}
		backupInterval.DeletePartialMatch(labels)
		backupLastSuccess.DeletePartialMatch(labels)
		return 0, nil
	}
	sched, err := cachev1alpha1.ParseSchedule(bs.Schedule)
	if err != nil {
		return 0, nil // day-one reports it as Stalled
	}
	recordScheduleMetrics(cc, sched)
	if meta.IsStatusConditionTrue(cc.Status.Conditions, cachev1alpha1.ConditionDataLost) {
		// A backup of what is left after a loss would only push the
		// backups from before it out; the schedule waits.
		return 0, nil
	}
	last := cc.CreationTimestamp.Time
	if cc.Status.Backup != nil && cc.Status.Backup.LastScheduleTime != nil {
		last = cc.Status.Backup.LastScheduleTime.Time
	}
	now := r.now()
	due, ok := latestDue(sched, last, now)
	if !ok {
		if next := sched.Next(last); !next.IsZero() {
			return next.Sub(now), nil
		}
		return 0, nil // never fires; day-one reports it as Stalled
	}
	// One scheduled backup at a time: while the last one still waits or
	// runs (a backup longer than the interval), this due time is skipped.
	for _, b := range backups {
		if b.Labels[LabelScheduled] == "true" && b.Status.Phase != cachev1alpha1.BackupCompleted && b.Status.Phase != cachev1alpha1.BackupFailed {
			r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventBackupSkipped, "Schedule",
				"Scheduled backup due at %s skipped: %s has not finished yet", due.UTC().Format(time.RFC3339), b.Name)
			err := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) {
				st.Backup = withScheduleTime(st.Backup, due)
			})
			return sched.Next(due).Sub(now), err
		}
	}
	name := fmt.Sprintf("%s-%s", cc.Name, due.UTC().Format("20060102150405"))
	cb := &cachev1alpha1.CacheBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cc.Namespace, Labels: map[string]string{
			cachev1alpha1.LabelCluster: cc.Name, LabelScheduled: "true",
		}},
		Spec: cachev1alpha1.CacheBackupSpec{Cluster: cc.Name},
	}
	if err := controllerutil.SetControllerReference(cc, cb, r.Client.Scheme()); err != nil {
		return 0, err
	}
	if err := r.Client.Create(ctx, cb); err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, err
	}
	if err := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) {
		st.Backup = withScheduleTime(st.Backup, due)
	}); err != nil {
		return 0, err
	}
	ctrl.LoggerFrom(ctx).Info("Scheduled backup created", "backup", name, "due", due)
	return sched.Next(due).Sub(now), nil
}

// recordScheduleMetrics exports what the backup alert needs: the
// schedule's interval and the last success.
func recordScheduleMetrics(cc *cachev1alpha1.CacheCluster, sched cron.Schedule) {
	first := sched.Next(time.Now())
	if second := sched.Next(first); !first.IsZero() && !second.IsZero() {
		backupInterval.WithLabelValues(cc.Namespace, cc.Name).Set(second.Sub(first).Seconds())
	}
	last := cc.CreationTimestamp.Time
	if b := cc.Status.Backup; b != nil && b.LastSuccessfulTime != nil {
		last = b.LastSuccessfulTime.Time
	}
	backupLastSuccess.WithLabelValues(cc.Namespace, cc.Name).Set(float64(last.Unix()))
}

func withScheduleTime(b *cachev1alpha1.BackupStatus, due time.Time) *cachev1alpha1.BackupStatus {
	out := &cachev1alpha1.BackupStatus{}
	if b != nil {
		out = b.DeepCopy()
	}
	t := metav1.NewTime(due)
	out.LastScheduleTime = &t
	return out
}

// maxCatchUp bounds the walk over due times missed since the last one.
const maxCatchUp = 1000

// latestDue is the latest due time in (last, now], if any. After a long
// outage with a frequent schedule it settles for now (truncated to the
// second) instead of walking every missed time.
func latestDue(sched cron.Schedule, last, now time.Time) (time.Time, bool) {
	var due time.Time
	next := sched.Next(last)
	for i := 0; !next.IsZero() && !next.After(now); i++ {
		if i == maxCatchUp {
			return now.Truncate(time.Second), true
		}
		due, next = next, sched.Next(next)
	}
	return due, !due.IsZero()
}

// verifyRestore compares the restored master's key count with the dump's
// metadata and records the Restored condition. Keys with a time to live
// that passed since the backup are dropped while loading, so the count may
// be lower by at most the dump's expiring keys. Errors reading the metadata
// are retried for a while; a dump whose key count is unknown (a header
// this operator cannot read) is reported as restored, saying so.
func (r *Reconciler) verifyRestore(ctx context.Context, cc *cachev1alpha1.CacheCluster, master PodState, pw string) error {
	loc := renderer.RestoreLocation(cc)
	op := cc.Status.Operation
	recovering := op != nil && op.Type == cachev1alpha1.OperationRestore
	if loc == nil || (!recovering && meta.FindStatusCondition(cc.Status.Conditions, cachev1alpha1.ConditionRestored) != nil) {
		return nil
	}
	cond := metav1.Condition{Type: cachev1alpha1.ConditionRestored, ObservedGeneration: cc.Generation}
	m, err := r.restoreMetadata(ctx, cc, *loc)
	var keys int64
	if err == nil {
		keys, err = dbKeys(ctx, master.IP, pw, m.DB)
	}
	key := client.ObjectKeyFromObject(cc)
	if err != nil {
		r.mu.Lock()
		if r.verifyErrorsSince == nil {
			r.verifyErrorsSince = map[types.NamespacedName]time.Time{}
		}
		since, ok := r.verifyErrorsSince[key]
		if !ok {
			since = r.now()
			r.verifyErrorsSince[key] = since
		}
		r.mu.Unlock()
		if r.now().Sub(since) < verifyRetryFor {
			return fmt.Errorf("checking the restore: %w", err)
		}
	}
	r.mu.Lock()
	delete(r.verifyErrorsSince, key)
	r.mu.Unlock()
	switch {
	case err != nil:
		cond.Status, cond.Reason = metav1.ConditionFalse, cachev1alpha1.ReasonRestoreMismatch
		cond.Message = fmt.Sprintf("could not check the restore of %s for %s: %v", loc.Key, verifyRetryFor, err)
	case m.Keys < 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, cachev1alpha1.ReasonRestoreVerified
		cond.Message = fmt.Sprintf("%s holds %d keys from %s (checksum %s checked when downloaded; the backup's key count is unknown)", master.Name, keys, loc, m.Checksum)
	case keys <= m.Keys && keys >= m.Keys-m.ExpiringKeys:
		cond.Status, cond.Reason = metav1.ConditionTrue, cachev1alpha1.ReasonRestoreVerified
		cond.Message = fmt.Sprintf("%s holds %d keys in db%d from %s (backup: %d keys, %d with a time to live; checksum %s checked when downloaded)",
			master.Name, keys, m.DB, loc, m.Keys, m.ExpiringKeys, m.Checksum)
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, cachev1alpha1.ReasonRestoreMismatch
		cond.Message = fmt.Sprintf("%s holds %d keys in db%d, the backup %s has %d (%d with a time to live): the pods did not load the dump as stored",
			master.Name, keys, m.DB, loc, m.Keys, m.ExpiringKeys)
	}
	typ := corev1.EventTypeNormal
	if cond.Status != metav1.ConditionTrue {
		typ = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(cc, nil, typ, cachev1alpha1.EventRestored, "Restore", "%s", cond.Message)
	return r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) {
		meta.SetStatusCondition(&st.Conditions, cond)
		if recovering {
			// A disaster recovery goes on: traffic to the checked master.
			next := st.Operation.DeepCopy()
			next.Step = cachev1alpha1.StepVerified
			st.Operation = next
		}
	})
}

func (r *Reconciler) restoreMetadata(ctx context.Context, cc *cachev1alpha1.CacheCluster, loc cachev1alpha1.BackupLocation) (backup.Metadata, error) {
	store, err := r.openStore(ctx, cc, loc, false)
	if err != nil {
		return backup.Metadata{}, err
	}
	return store.Metadata(ctx, loc.Key)
}

// dbKeys is the number of keys in one database of a pod's Redis.
func dbKeys(ctx context.Context, ip, pw string, db int64) (int64, error) {
	rc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(ip, "6379"), Password: pw, MaxRetries: -1, DialTimeout: 5 * time.Second})
	defer rc.Close()
	info, err := rc.Info(ctx, "keyspace").Result()
	if err != nil {
		return 0, err
	}
	prefix := fmt.Sprintf("db%d:keys=", db)
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			n, _, _ := strings.Cut(rest, ",")
			return strconv.ParseInt(n, 10, 64)
		}
	}
	return 0, nil
}

// backupsOf maps a CacheBackup to its cluster.
func backupsOf(_ context.Context, o client.Object) []reconcile.Request {
	b, ok := o.(*cachev1alpha1.CacheBackup)
	if !ok || b.Spec.Cluster == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.Cluster}}}
}
