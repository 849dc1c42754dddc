package daytwo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/backup"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

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
func (r *Reconciler) observeBackups(ctx context.Context, s *scope) error {
	backups, err := r.clusterBackups(ctx, s.cc)
	if err != nil {
		return err
	}
	s.backups = backups
	r.backupState(s.cc, backups, &s.snap)
	return nil
}

// backupState is the planner's view of the Backup operation's CacheBackup
// and of the oldest one waiting for its turn.
func (r *Reconciler) backupState(cc *cachev1alpha1.CacheCluster, backups []cachev1alpha1.CacheBackup, snap *plan.Snapshot) {
	opBackup := ""
	if op := cc.Status.Operation; op != nil && op.Type == cachev1alpha1.OperationBackup {
		opBackup = op.Backup
		snap.Backup = &plan.BackupState{Name: op.Backup}
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

// backupsOf maps a CacheBackup to its cluster.
func backupsOf(_ context.Context, o client.Object) []reconcile.Request {
	b, ok := o.(*cachev1alpha1.CacheBackup)
	if !ok || b.Spec.Cluster == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.Cluster}}}
}
