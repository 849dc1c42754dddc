package daytwo

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// applyRetention removes what the retention rules choose
// (plan.Retention): a failed backup's record; a completed backup's stored
// dump first, then its CacheBackup.
func (r *Reconciler) applyRetention(ctx context.Context, clusterKey types.NamespacedName) error {
	cc := &cachev1alpha1.CacheCluster{}
	if err := r.APIReader.Get(ctx, clusterKey, cc); err != nil {
		return client.IgnoreNotFound(err)
	}
	ret := cc.Spec.Backup.Retention
	if ret == nil {
		return nil
	}
	// An admitted maxAge always parses; one that does not (written under
	// an older schema) only turns the age rule off.
	var maxAge time.Duration
	if ret.MaxAge != nil {
		d, err := ret.MaxAge.Parse()
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("Ignoring backup.retention.maxAge", "error", err.Error())
		}
		maxAge = d
	}
	backups, err := r.clusterBackups(ctx, cc)
	if err != nil {
		return err
	}
	failed, prune := plan.Retention(cc, backups, maxAge, r.now())
	var errs []error
	for _, b := range failed {
		if err := r.Client.Delete(ctx, &b); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	for _, p := range prune {
		b := p.Backup
		if err := r.deleteStored(ctx, cc, *b.Status.Location); err != nil {
			errs = append(errs, fmt.Errorf("backup %s: %w", b.Name, err))
			continue
		}
		if err := r.Client.Delete(ctx, &b); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventBackupPruned, "Retention", "Removed backup %s and %s (%s)", b.Name, b.Status.Location, p.Why)
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
