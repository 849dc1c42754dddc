package daytwo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/backup"
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
		if err := r.deleteStored(ctx, cc, &b); err != nil {
			errs = append(errs, fmt.Errorf("backup %s: %w", b.Name, err))
			continue
		}
		if err := r.Client.Delete(ctx, &b); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		what := b.Status.Location.String()
		if b.IsSharded() {
			what = fmt.Sprintf("its %d shards' dumps in %s", len(b.Status.Shards), what)
		}
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventBackupPruned, "Retention", "Removed backup %s and %s (%s)", b.Name, what, p.Why)
	}
	return errors.Join(errs...)
}

// deleteStored removes what a completed backup stored: its dump and
// metadata, or for a sharded cluster's backup its manifest first, then
// every shard's dump and metadata.
func (r *Reconciler) deleteStored(ctx context.Context, cc *cachev1alpha1.CacheCluster, b *cachev1alpha1.CacheBackup) error {
	loc := *b.Status.Location
	store, err := r.openStore(ctx, cc, loc, true)
	if err != nil {
		return err
	}
	if !cachev1alpha1.IsShardedKey(loc.Key) {
		return store.Delete(ctx, loc.Key)
	}
	return store.DeleteSharded(ctx, loc.Key, shardFiles(b))
}

// shardFiles are the names of a sharded backup's dumps in its folder, as
// its CacheBackup records them.
func shardFiles(b *cachev1alpha1.CacheBackup) []string {
	folder := b.Status.Location.Key
	files := make([]string, 0, len(b.Status.Shards))
	for _, sh := range b.Status.Shards {
		if f, ok := strings.CutPrefix(sh.Key, folder); ok && f != "" && !strings.Contains(f, "/") {
			files = append(files, f)
		} else {
			files = append(files, backup.ShardFile(int(sh.Index)))
		}
	}
	return files
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
