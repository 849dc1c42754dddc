package daytwo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/backup"
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/renderer"
)

// A new sharded cluster restored from a sharded backup
// (plan/sharded_restore.go decides): the backup's manifest gives the
// planner each shard's slots, and once they are served each shard's
// master is checked against it.

// manifests remembers the manifest of the sharded backup each restoring
// cluster reads, so the bucket is asked once per restore, not on every
// reconcile.
type manifests struct {
	mu sync.Mutex
	by map[types.NamespacedName]cachedManifest
}

type cachedManifest struct {
	key string
	m   backup.Manifest
}

func (c *manifests) get(cluster types.NamespacedName, key string) (backup.Manifest, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.by[cluster]
	return m.m, ok && m.key == key
}

func (c *manifests) put(cluster types.NamespacedName, key string, m backup.Manifest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[types.NamespacedName]cachedManifest{}
	}
	c.by[cluster] = cachedManifest{key: key, m: m}
}

func (c *manifests) forget(cluster types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.by, cluster)
}

// manifest reads the manifest of the sharded backup at loc, once per
// cluster and location.
func (r *Reconciler) manifest(ctx context.Context, cc *cachev1alpha1.CacheCluster, loc cachev1alpha1.BackupLocation) (backup.Manifest, error) {
	key := client.ObjectKeyFromObject(cc)
	if m, ok := r.manifests.get(key, loc.Key); ok {
		return m, nil
	}
	store, err := r.openStore(ctx, cc, loc, false)
	if err != nil {
		return backup.Manifest{}, err
	}
	m, err := store.Manifest(ctx, loc.Key)
	if err != nil {
		return m, err
	}
	r.manifests.put(key, loc.Key, m)
	return m, nil
}

// observeShardedRestore gives the planner the layout of the sharded
// backup a new sharded cluster restores, until its restore is checked,
// and the refusal of one that did not fit.
func (r *Reconciler) observeShardedRestore(ctx context.Context, s *scope) {
	cc := s.cc
	if c := meta.FindStatusCondition(cc.Status.Conditions, cachev1alpha1.ConditionRestored); c != nil && c.Status == metav1.ConditionFalse && c.Reason == cachev1alpha1.ReasonRestoreIncompatible {
		s.snap.Sharded.Restore = &plan.ShardedRestore{Refused: c.Message}
		return
	}
	if !s.snap.RestorePending {
		r.manifests.forget(s.key)
		return
	}
	loc := renderer.RestoreLocation(cc)
	if loc == nil {
		s.snap.Sharded.Restore = &plan.ShardedRestore{Err: "spec.restore is not resolved to a stored backup yet"}
		return
	}
	st := &plan.ShardedRestore{Where: loc.String()}
	s.snap.Sharded.Restore = st
	m, err := r.manifest(ctx, cc, *loc)
	if err != nil {
		st.Err = err.Error()
		return
	}
	for _, sh := range m.Shards {
		rs, err := plan.ParseSlotStrings(sh.Slots)
		if err != nil {
			st.Layout, st.Err = nil, fmt.Sprintf("shard %d: %v", sh.Index, err)
			return
		}
		st.Layout = append(st.Layout, rs)
	}
}

// refuseRestore records that the backup does not fit the cluster: the
// Restored condition False (RestoreIncompatible), which day-one reports
// as Stalled.
func (r *Reconciler) refuseRestore(_ context.Context, s *scope, a plan.Action) error {
	msg := a.Reason
	s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventRestored, "Restore", "%s", msg)
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: cachev1alpha1.ConditionRestored, Status: metav1.ConditionFalse, Reason: cachev1alpha1.ReasonRestoreIncompatible,
			Message: msg, ObservedGeneration: s.cc.Generation,
		})
	})
	return nil
}

// verifyShardedRestore compares each shard's restored master with the
// backup's manifest: the keys of its first database between the shard's
// keys without a time to live and all its keys, and the slots it serves
// equal to the ones the backup recorded for the shard. It records the
// Restored condition, as a replication cluster's check does.
func (r *Reconciler) verifyShardedRestore(ctx context.Context, s *scope, a plan.Action) error {
	cc := s.cc
	loc := renderer.RestoreLocation(cc)
	if loc == nil {
		return nil
	}
	m, err := r.manifest(ctx, cc, *loc)
	var lines, wrong []string
	var total, want int64
	if err == nil {
		for _, sh := range m.Shards {
			line, bad, keys, err2 := r.checkShard(ctx, s, a.Shards, sh)
			if err2 != nil {
				err = err2
				break
			}
			total, want = total+keys, want+sh.Keys
			lines = append(lines, line)
			if bad {
				wrong = append(wrong, line)
			}
		}
	}
	if err != nil {
		if !r.verifyErrorExpired(s.key) {
			return fmt.Errorf("checking the restore: %w", err)
		}
	} else {
		r.verifyErrorCleared(s.key)
	}
	cond := metav1.Condition{Type: cachev1alpha1.ConditionRestored, ObservedGeneration: cc.Generation}
	switch {
	case err != nil:
		cond.Status, cond.Reason = metav1.ConditionFalse, cachev1alpha1.ReasonRestoreMismatch
		cond.Message = fmt.Sprintf("could not check the restore of %s for %s: %v", loc, verifyRetryFor, err)
	case len(wrong) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, cachev1alpha1.ReasonRestoreMismatch
		cond.Message = fmt.Sprintf("%d of %d shards do not hold what %s holds: %s", len(wrong), len(m.Shards), loc, strings.Join(wrong, "; "))
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, cachev1alpha1.ReasonRestoreVerified
		cond.Message = fmt.Sprintf("%d shards hold %d keys from %s (backup: %d; each dump's checksum checked when downloaded): %s", len(m.Shards), total, loc, want, strings.Join(lines, "; "))
	}
	typ := corev1.EventTypeNormal
	if cond.Status != metav1.ConditionTrue {
		typ = corev1.EventTypeWarning
	}
	s.eventf(typ, cachev1alpha1.EventRestored, "Restore", "%s", cond.Message)
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) { meta.SetStatusCondition(&st.Conditions, cond) })
	return nil
}

// checkShard compares one shard's master with its part of the manifest;
// bad when they differ, keys what the master holds.
func (r *Reconciler) checkShard(ctx context.Context, s *scope, shards []cachev1alpha1.ShardStatus, sh backup.ShardManifest) (line string, bad bool, keys int64, err error) {
	i := slices.IndexFunc(shards, func(st cachev1alpha1.ShardStatus) bool { return int(st.Index) == sh.Index })
	if i < 0 || shards[i].Master == "" {
		return fmt.Sprintf("shard %d has no master", sh.Index), true, 0, nil
	}
	st := shards[i]
	p, ok := s.snap.Pod(st.Master)
	if !ok || p.IP == "" {
		return "", false, 0, fmt.Errorf("%s has no address", st.Master)
	}
	if keys, err = dbKeys(ctx, p.IP, s.password, sh.DB); err != nil {
		return "", false, 0, fmt.Errorf("%s: %w", st.Master, err)
	}
	want, _ := plan.ParseSlotStrings(sh.Slots)
	serves, _ := plan.ParseSlotStrings(st.Slots)
	line = fmt.Sprintf("shard %d (%s, slots %s) holds %d keys, the backup %d (%d with a time to live)", sh.Index, st.Master, strings.Join(st.Slots, ","), keys, sh.Keys, sh.ExpiringKeys)
	switch {
	case !slices.Equal(want, serves):
		return line + fmt.Sprintf(", and the backup recorded slots %s", strings.Join(sh.Slots, ",")), true, keys, nil
	case sh.Keys >= 0 && (keys > sh.Keys || keys < sh.Keys-sh.ExpiringKeys):
		return line, true, keys, nil
	}
	return line, false, keys, nil
}
