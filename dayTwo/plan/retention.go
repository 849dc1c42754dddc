package plan

import (
	"fmt"
	"sort"
	"strings"
	"time"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
)

// Prune is a completed backup that retention removes: its stored dump
// first, then its CacheBackup.
type Prune struct {
	Backup cachev1alpha1.CacheBackup
	// Why says which rule removes it.
	Why string
}

// Retention chooses what spec.backup.retention (count, age; maxAge 0 keeps
// any age) removes from a cluster's backups: failed backups (records with
// nothing stored) and completed ones beyond the rules. The newest
// completed backup always stays, and nothing is removed while the data is
// lost: the backups from before the loss are what a restore needs. A dump
// on a claim, or in a folder, the cluster no longer backs up to stays:
// its store pod does not serve it.
func Retention(cc *cachev1alpha1.CacheCluster, backups []cachev1alpha1.CacheBackup, maxAge time.Duration, now time.Time) (failed []cachev1alpha1.CacheBackup, prune []Prune) {
	ret := cc.Spec.Backup.Retention
	if ret == nil || meta.IsStatusConditionTrue(cc.Status.Conditions, cachev1alpha1.ConditionDataLost) {
		return nil, nil
	}
	tooOld := func(b cachev1alpha1.CacheBackup) bool {
		return maxAge > 0 && now.Sub(b.Status.CompletionTime.Time) > maxAge
	}
	beyondCount := func(i int) bool { return ret.Count != nil && i >= int(*ret.Count) }
	done, failedAll := endedNewestFirst(backups)
	for i, b := range failedAll {
		if beyondCount(i) || tooOld(b) {
			failed = append(failed, b)
		}
	}
	for i, b := range done {
		byCount, byAge := beyondCount(i), tooOld(b)
		if i == 0 || (!byCount && !byAge) || !servedBy(cc, *b.Status.Location) {
			continue
		}
		why := fmt.Sprintf("retention keeps %d", ptr.Deref(ret.Count, 0))
		if byAge {
			why = "older than " + string(*ret.MaxAge)
		}
		prune = append(prune, Prune{Backup: b, Why: why})
	}
	return failed, prune
}

// endedNewestFirst splits the backups that ended into completed (with a
// stored dump) and failed, newest first.
func endedNewestFirst(backups []cachev1alpha1.CacheBackup) (done, failed []cachev1alpha1.CacheBackup) {
	for _, b := range backups {
		switch {
		case b.Status.CompletionTime == nil:
		case b.Status.Phase == cachev1alpha1.BackupCompleted && b.Status.Location != nil:
			done = append(done, b)
		case b.Status.Phase == cachev1alpha1.BackupFailed:
			failed = append(failed, b)
		}
	}
	for _, l := range [][]cachev1alpha1.CacheBackup{done, failed} {
		sort.Slice(l, func(i, j int) bool { return l[j].Status.CompletionTime.Before(l[i].Status.CompletionTime) })
	}
	return done, failed
}

// servedBy tells whether the cluster's backup store serves a location: any
// S3 location, or a file in the cluster's folder on the claim it backs up
// to now.
func servedBy(cc *cachev1alpha1.CacheCluster, loc cachev1alpha1.BackupLocation) bool {
	pvc := loc.PVC
	if pvc == nil {
		return true
	}
	cur := cc.Spec.Backup.PVC
	return cur != nil && cur.ClaimName == pvc.ClaimName && strings.HasPrefix(loc.Key, renderer.ClaimFolder(cc))
}
