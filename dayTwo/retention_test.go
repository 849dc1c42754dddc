package daytwo

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// Backups on a claim, or in a folder, the cluster no longer backs up to
// are left alone by retention: its store pod does not serve them. (Retention that removes
// files is tested end to end against real S3 and a real claim.)
func TestRetentionSkipsBackupsOnAClaimNoLongerUsed(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := cachev1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cc := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	cc.Spec.Version = "7.0.15"
	cc.Spec.Backup.PVC = &cachev1alpha1.PVCTarget{ClaimName: "new"}
	cc.Spec.Backup.Retention = &cachev1alpha1.BackupRetention{Count: ptr.To[int32](1)}
	objs := []client.Object{cc}
	for i := range 3 {
		b := &cachev1alpha1.CacheBackup{
			ObjectMeta: metav1.ObjectMeta{Name: "c-" + string(rune('a'+i)), Namespace: "ns", CreationTimestamp: metav1.NewTime(now.Add(time.Duration(i) * time.Minute))},
			Spec:       cachev1alpha1.CacheBackupSpec{Cluster: "c"},
		}
		done := metav1.NewTime(now.Add(time.Duration(i) * time.Minute))
		b.Status = cachev1alpha1.CacheBackupStatus{
			Phase: cachev1alpha1.BackupCompleted, CompletionTime: &done,
			Location: &cachev1alpha1.BackupLocation{PVC: &cachev1alpha1.PVCTarget{ClaimName: "old"}, Key: "ns/c/" + b.Name + ".rdb"},
		}
		if i == 0 {
			// On the claim in use, but under a prefix it no longer has.
			b.Status.Location = &cachev1alpha1.BackupLocation{PVC: &cachev1alpha1.PVCTarget{ClaimName: "new", Prefix: "old/"}, Key: "old/ns/c/" + b.Name + ".rdb"}
		}
		objs = append(objs, b)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&cachev1alpha1.CacheBackup{}).Build()
	r := &Reconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(10), Now: func() time.Time { return now.Add(time.Hour) }}
	if err := r.applyRetention(context.Background(), client.ObjectKeyFromObject(cc)); err != nil {
		t.Fatalf("retention: %v", err)
	}
	list := &cachev1alpha1.CacheBackupList{}
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Fatalf("%d backups left, want all 3 (their claim is no longer served)", len(list.Items))
	}
}

// A sharded backup's dumps, as retention removes them: the names its
// CacheBackup records in the folder, the standard name for one that does
// not name a file of it.
func TestShardFilesOfAShardedBackup(t *testing.T) {
	b := &cachev1alpha1.CacheBackup{}
	b.Status.Location = &cachev1alpha1.BackupLocation{Key: "p/ns/c/c-1/"}
	b.Status.Shards = []cachev1alpha1.ShardBackup{
		{Index: 0, Key: "p/ns/c/c-1/shard-0.rdb"},
		{Index: 1, Key: "elsewhere/shard-1.rdb"},
		{Index: 2, Key: "p/ns/c/c-1/sub/shard-2.rdb"},
		{Index: 3},
	}
	got := shardFiles(b)
	want := []string{"shard-0.rdb", "shard-1.rdb", "shard-2.rdb", "shard-3.rdb"}
	if len(got) != len(want) {
		t.Fatalf("shardFiles = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("shardFiles = %v, want %v", got, want)
		}
	}
}
