package daytwo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

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
