package plan

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// A sharded cluster's backup is one unit for retention: one CacheBackup
// whose location is its folder, kept or removed whole by the same rules
// as a replication cluster's dump (the executor removes the manifest, then
// every shard). On a claim, a folder in the cluster's own folder is
// served; one elsewhere is left alone.
func TestRetentionOfShardedBackups(t *testing.T) {
	at := func(min int) *metav1.Time { t := metav1.NewTime(now.Add(time.Duration(min) * time.Minute)); return &t }
	backupAt := func(name string, min int, loc cachev1alpha1.BackupLocation, phase cachev1alpha1.BackupPhase) cachev1alpha1.CacheBackup {
		b := cachev1alpha1.CacheBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
		b.Status.Phase, b.Status.CompletionTime, b.Status.Location = phase, at(min), &loc
		for i := range 3 {
			b.Status.Shards = append(b.Status.Shards, cachev1alpha1.ShardBackup{Index: int32(i), Key: loc.Key + "shard-" + string(rune('0'+i)) + ".rdb"})
		}
		return b
	}
	s3 := func(key string) cachev1alpha1.BackupLocation {
		return cachev1alpha1.BackupLocation{S3: &cachev1alpha1.S3Target{Bucket: "b"}, Key: key}
	}
	claim := func(name, key string) cachev1alpha1.BackupLocation {
		return cachev1alpha1.BackupLocation{PVC: &cachev1alpha1.PVCTarget{ClaimName: name}, Key: key}
	}
	tests := []struct {
		name       string
		target     cachev1alpha1.BackupSpec
		backups    []cachev1alpha1.CacheBackup
		maxAge     time.Duration
		wantPruned []string
		wantFailed []string
	}{
		{
			name:   "count keeps the newest folders",
			target: cachev1alpha1.BackupSpec{S3: &cachev1alpha1.S3Target{Bucket: "b"}, Retention: &cachev1alpha1.BackupRetention{Count: ptr.To[int32](2)}},
			backups: []cachev1alpha1.CacheBackup{
				backupAt("c-1", -30, s3("ns/c/c-1/"), cachev1alpha1.BackupCompleted),
				backupAt("c-2", -20, s3("ns/c/c-2/"), cachev1alpha1.BackupCompleted),
				backupAt("c-3", -10, s3("ns/c/c-3/"), cachev1alpha1.BackupCompleted),
			},
			wantPruned: []string{"c-1"},
		},
		{
			name:   "age, and a failed attempt's record; the newest stays",
			target: cachev1alpha1.BackupSpec{S3: &cachev1alpha1.S3Target{Bucket: "b"}, Retention: &cachev1alpha1.BackupRetention{MaxAge: ptr.To(cachev1alpha1.Duration("15m"))}},
			backups: []cachev1alpha1.CacheBackup{
				backupAt("c-1", -30, s3("ns/c/c-1/"), cachev1alpha1.BackupFailed),
				backupAt("c-2", -20, s3("ns/c/c-2/"), cachev1alpha1.BackupCompleted),
				backupAt("c-3", -19, s3("ns/c/c-3/"), cachev1alpha1.BackupCompleted),
			},
			maxAge:     15 * time.Minute,
			wantPruned: []string{"c-2"},
			wantFailed: []string{"c-1"},
		},
		{
			name:   "a folder on the claim the cluster backs up to, not one on another claim",
			target: cachev1alpha1.BackupSpec{PVC: &cachev1alpha1.PVCTarget{ClaimName: "now"}, Retention: &cachev1alpha1.BackupRetention{Count: ptr.To[int32](1)}},
			backups: []cachev1alpha1.CacheBackup{
				backupAt("c-1", -30, claim("before", "ns/c/c-1/"), cachev1alpha1.BackupCompleted),
				backupAt("c-2", -20, claim("now", "ns/c/c-2/"), cachev1alpha1.BackupCompleted),
				backupAt("c-3", -10, claim("now", "ns/c/c-3/"), cachev1alpha1.BackupCompleted),
			},
			wantPruned: []string{"c-2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cc := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
			cc.Spec.Mode, cc.Spec.Shards, cc.Spec.Backup = cachev1alpha1.ModeSharded, ptr.To[int32](3), tt.target
			failed, prune := Retention(cc, tt.backups, tt.maxAge, now)
			var pruned, failedNames []string
			for _, p := range prune {
				pruned = append(pruned, p.Backup.Name)
				g.Expect(p.Backup.IsSharded()).To(BeTrue())
				g.Expect(p.Backup.Status.Shards).To(HaveLen(3), "the executor removes every shard it lists")
			}
			for _, b := range failed {
				failedNames = append(failedNames, b.Name)
			}
			g.Expect(pruned).To(Equal(tt.wantPruned))
			g.Expect(failedNames).To(Equal(tt.wantFailed))
		})
	}
}
