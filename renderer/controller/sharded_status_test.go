package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// A sharded cluster whose pods are all ready is Ready only once day-two
// says every slot is served (ShardsReady): Initializing before, Degraded
// when a formed cluster stops serving a slot, Running again after.
func TestSummarizeShardedWaitsForShardsReady(t *testing.T) {
	g := NewWithT(t)
	cc := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Generation: 1},
		Spec: cachev1alpha1.CacheClusterSpec{Mode: cachev1alpha1.ModeSharded, Shards: ptr.To[int32](3)}}
	sts := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](6)}, Status: appsv1.StatefulSetStatus{Replicas: 6, ReadyReplicas: 6}}
	ready := func() {
		summarize(&scope{cc: cc, statefulSet: sts, children: []childHealth{{kind: "StatefulSet", status: status.CurrentStatus}}}, nil)
	}
	shards := func(s metav1.ConditionStatus, msg string) {
		meta.SetStatusCondition(&cc.Status.Conditions, metav1.Condition{Type: cachev1alpha1.ConditionShardsReady, Status: s, Reason: "Test", Message: msg, ObservedGeneration: 1})
	}

	ready()
	g.Expect(cc.Status.Phase).To(Equal(cachev1alpha1.PhaseInitializing))
	g.Expect(condition(cc, cachev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
	g.Expect(condition(cc, cachev1alpha1.ConditionReady).Message).To(Equal("Redis Cluster: the nodes have not formed the cluster yet"))

	shards(metav1.ConditionFalse, "sharded-0 reports cluster_state:fail with 5462 of 16384 slots served")
	ready()
	g.Expect(cc.Status.Phase).To(Equal(cachev1alpha1.PhaseInitializing))
	g.Expect(condition(cc, cachev1alpha1.ConditionReady).Message).To(ContainSubstring("5462 of 16384 slots served"))

	shards(metav1.ConditionTrue, "every slot served")
	ready()
	g.Expect(cc.Status.Phase).To(Equal(cachev1alpha1.PhaseRunning))
	g.Expect(condition(cc, cachev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))

	shards(metav1.ConditionFalse, "sharded-0 reports cluster_state:fail with 16384 of 16384 slots served")
	ready()
	g.Expect(cc.Status.Phase).To(Equal(cachev1alpha1.PhaseDegraded))
	g.Expect(condition(cc, cachev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
}
