package daytwo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cacheops/cacheops/dayTwo/backup"
	"github.com/cacheops/cacheops/renderer"
	"github.com/redis/go-redis/v9"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// errRestore cancels a backup stream that a disaster recovery pre-empts.
var errRestore = errors.New("the cluster lost its data and is being restored")

// observeRestore fills the snapshot's view of a lost dataset and of what
// a disaster recovery needs: the DataLost condition, the annotation that
// accepts a loss, the latest completed backup and the restore ConfigMap.
func (r *Reconciler) observeRestore(ctx context.Context, s *scope) error {
	cc, backups, snap := s.cc, s.backups, &s.snap
	snap.AutoRestore = cc.Spec.Backup.AutoRestore
	lossFound := r.now()
	if c := meta.FindStatusCondition(cc.Status.Conditions, cachev1alpha1.ConditionDataLost); c != nil && c.Status == metav1.ConditionTrue {
		snap.DataLost = true
		snap.RestoreFailed = c.Reason == cachev1alpha1.ReasonRestoreFailed
		lossFound = c.LastTransitionTime.Time
	}
	_, snap.AcceptDataLoss = cc.Annotations[cachev1alpha1.AnnotationAcceptDataLoss]
	// What a recovery restores: the newest completed backup that holds
	// keys (or an unknown count) and was taken before the loss was found.
	for _, b := range backups {
		if b.Status.Phase != cachev1alpha1.BackupCompleted || b.Status.Location == nil || b.Status.CompletionTime == nil || b.Status.Keys == 0 {
			continue
		}
		taken := b.Status.CompletionTime.Time
		if b.Status.StartTime != nil {
			taken = b.Status.StartTime.Time
		}
		if !taken.Before(lossFound) {
			continue
		}
		if l := snap.LatestBackup; l == nil || taken.After(l.Taken) {
			snap.LatestBackup = &plan.RestorePoint{Name: b.Name, Taken: taken, Location: *b.Status.Location}
		}
	}
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: cc.Name + "-restore"}, cm)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		snap.RestoreConfig = &plan.RestoreConfig{State: cm.Data["state"], Replace: cm.Data["replace"]}
	}
	if snap.Sharded != nil {
		r.observeShardedRestore(ctx, s)
	}
	return nil
}

// reportDataLoss sets the DataLost condition.
func (r *Reconciler) reportDataLoss(ctx context.Context, s *scope, a plan.Action) error {
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: cachev1alpha1.ConditionDataLost, Status: metav1.ConditionTrue, Reason: cachev1alpha1.ReasonDataLost,
			Message: a.Reason, ObservedGeneration: s.cc.Generation,
		})
	})
	ctrl.LoggerFrom(ctx).Info("Data lost", "reason", a.Reason)
	s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventDataLost, "DataLoss", "%s", a.Reason)
	return nil
}

// acceptDataLoss serves what the cluster holds, as a person asked with the
// annotation, and takes the annotation away.
func (r *Reconciler) acceptDataLoss(ctx context.Context, s *scope, a plan.Action) error {
	cc := s.cc
	if meta.IsStatusConditionTrue(cc.Status.Conditions, cachev1alpha1.ConditionDataLost) {
		s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
			if st.Operation != nil && st.Operation.Type == cachev1alpha1.OperationRestore {
				// A restore that cannot finish (the dump is gone) ends
				// here; the pods start on what they hold.
				st.Operation = nil
			}
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{
				Type: cachev1alpha1.ConditionDataLost, Status: metav1.ConditionFalse, Reason: cachev1alpha1.ReasonDataLossAccepted,
				Message: "The loss was accepted (annotation " + cachev1alpha1.AnnotationAcceptDataLoss + "); the cluster serves what it holds", ObservedGeneration: cc.Generation,
			})
		})
		if err := r.commit(ctx, &s.status); err != nil {
			return err
		}
		s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventDataLossAccepted, "DataLoss", "The data loss was accepted; the cluster serves what it holds")
	}
	r.Prober.AcceptLoss(s.key)
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, cachev1alpha1.AnnotationAcceptDataLoss))
	return client.IgnoreNotFound(r.Client.Patch(ctx, cc.DeepCopy(), client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)))
}

// startRestore records a disaster recovery from the latest backup; a
// backup stream in progress is aborted.
func (r *Reconciler) startRestore(ctx context.Context, s *scope, a plan.Action) error {
	if op := s.cc.Status.Operation; op != nil && op.Type == cachev1alpha1.OperationBackup {
		r.backups.abort(s.key, errRestore)
	}
	op := a.Operation.DeepCopy()
	op.ID, op.StartedAt = newID(), metav1.NewTime(r.now())
	loc := s.snap.LatestBackup.Location
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		st.Operation = op
		st.RestoreFrom = loc.DeepCopy()
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: cachev1alpha1.ConditionDataLost, Status: metav1.ConditionTrue, Reason: cachev1alpha1.ReasonDataLost,
			Message: a.Reason, ObservedGeneration: s.cc.Generation,
		})
	})
	ctrl.LoggerFrom(ctx).Info("Disaster recovery started", "operation", op.ID, "backup", op.Backup, "reason", a.Reason)
	s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventRestoreStarted, string(op.Type), "%s %s: %s", op.Type, op.ID, a.Reason)
	return nil
}

// verifyRestoreStep compares the restored master's keys with the backup
// (each shard's master's, for a sharded cluster).
func (r *Reconciler) verifyRestoreStep(ctx context.Context, s *scope, a plan.Action) error {
	if s.cc.IsSharded() {
		return r.verifyShardedRestore(ctx, s, a)
	}
	p, _ := s.snap.Pod(a.Pod)
	return r.verifyRestore(ctx, s, p)
}

// completeRestore ends a disaster recovery: the data is back, or (the
// restore failed its check) a person decides.
func (r *Reconciler) completeRestore(ctx context.Context, s *scope, a plan.Action) error {
	cc := s.cc
	op := cc.Status.Operation
	lost := metav1.Condition{
		Type: cachev1alpha1.ConditionDataLost, Status: metav1.ConditionFalse, Reason: cachev1alpha1.ReasonDataRestored,
		Message: fmt.Sprintf("Restored from backup %s", op.Backup), ObservedGeneration: cc.Generation,
	}
	typ := corev1.EventTypeNormal
	switch restored := meta.FindStatusCondition(cc.Status.Conditions, cachev1alpha1.ConditionRestored); {
	case restored != nil && restored.Status != metav1.ConditionTrue:
		// The pods did not load the dump as stored: no second automatic
		// attempt.
		lost.Status, lost.Reason, typ = metav1.ConditionTrue, cachev1alpha1.ReasonRestoreFailed, corev1.EventTypeWarning
		lost.Message = fmt.Sprintf("The restore of backup %s failed its check: %s. Restore another backup into a new cluster, or accept what the cluster holds: kubectl annotate cachecluster %s %s=true",
			op.Backup, restored.Message, cc.Name, cachev1alpha1.AnnotationAcceptDataLoss)
	case restored != nil:
		lost.Message += ": " + restored.Message
	}
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		st.Operation = nil
		meta.SetStatusCondition(&st.Conditions, lost)
	})
	took := r.now().Sub(op.StartedAt.Time).Round(time.Millisecond)
	ctrl.LoggerFrom(ctx).Info("Disaster recovery ended", "operation", op.ID, "backup", op.Backup, "duration", took.String(), "outcome", lost.Reason)
	s.eventf(typ, cachev1alpha1.EventRestoreCompleted, string(op.Type), "%s %s ended in %s (%s). %s", op.Type, op.ID, took, lost.Reason, lost.Message)
	return nil
}

// verifyRetryFor is how long errors reading a restored backup's metadata
// are retried before the restore is recorded as unverified (the master
// label, and so client traffic, waits meanwhile).
const verifyRetryFor = 2 * time.Minute

// verifyRestore compares the restored master's key count with the dump's
// metadata and records the Restored condition. Keys with a time to live
// that passed since the backup are dropped while loading, so the count may
// be lower by at most the dump's expiring keys. Errors reading the metadata
// are retried for a while; a dump whose key count is unknown (a header
// this operator cannot read) is reported as restored, saying so.
func (r *Reconciler) verifyRestore(ctx context.Context, s *scope, master plan.PodState) error {
	cc, pw := s.cc, s.password
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
	if err != nil && !r.verifyErrorExpired(key) {
		return fmt.Errorf("checking the restore: %w", err)
	}
	r.verifyErrorCleared(key)
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
	s.eventf(typ, cachev1alpha1.EventRestored, "Restore", "%s", cond.Message)
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		meta.SetStatusCondition(&st.Conditions, cond)
		if recovering {
			// A disaster recovery goes on: traffic to the checked master.
			next := st.Operation.DeepCopy()
			next.Step = cachev1alpha1.StepVerified
			st.Operation = next
		}
	})
	return nil
}

// verifyErrorExpired notes that checking a cluster's restore failed and
// says whether it has failed for verifyRetryFor: then the check is
// recorded as failed instead of retried.
func (r *Reconciler) verifyErrorExpired(key types.NamespacedName) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.verifyErrorsSince == nil {
		r.verifyErrorsSince = map[types.NamespacedName]time.Time{}
	}
	since, ok := r.verifyErrorsSince[key]
	if !ok {
		since = r.now()
		r.verifyErrorsSince[key] = since
	}
	return r.now().Sub(since) >= verifyRetryFor
}

// verifyErrorCleared forgets the failures of a cluster's restore check.
func (r *Reconciler) verifyErrorCleared(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.verifyErrorsSince, key)
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
