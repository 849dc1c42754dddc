package daytwo

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

func TestRequeuePriority(t *testing.T) {
	master := func(reachable bool) plan.PodState {
		return plan.PodState{Name: "c-0", Observed: true, Obs: probe.Observation{Pod: "c-0", Reachable: reachable, Role: "master"}}
	}
	for _, tc := range []struct {
		name    string
		op      *cachev1alpha1.OperationStatus
		pod     plan.PodState
		routine bool
		want    int
	}{
		{name: "healthy, nothing to do", pod: master(true), routine: true, want: priorityRoutine},
		{name: "healthy, a step taken", pod: master(true), want: priorityNormal},
		{name: "the master does not answer", pod: master(false), routine: true, want: priorityTrouble},
		{name: "a failover runs", op: &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationFailover}, pod: master(true), want: priorityTrouble},
		{name: "a scale runs", op: &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationScaling}, pod: master(true), want: priorityNormal},
		{name: "not probed yet", pod: plan.PodState{Name: "c-0"}, want: priorityNormal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
			cc.Status.CurrentMaster, cc.Status.Operation = "c-0", tc.op
			s := newScope(cc, nil)
			s.snap.Pods = []plan.PodState{tc.pod}
			got := withPriority(s, ctrl.Result{}, tc.routine)
			if got.Priority == nil || *got.Priority != tc.want {
				t.Fatalf("priority %v, want %d", got.Priority, tc.want)
			}
		})
	}
}

// TestAnUrgentWakeUpGoesBeforeRoutineWork: with a hundred routine
// rechecks due, the cluster whose master stopped answering is the next
// one a worker takes.
func TestAnUrgentWakeUpGoesBeforeRoutineWork(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	low := priorityRoutine
	for i := range 100 {
		q.AddWithOpts(priorityqueue.AddOpts{Priority: &low}, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: fmt.Sprintf("team-%d", i), Name: "c"}})
	}
	h := wakeHandler()
	news := types.NamespacedName{Namespace: "team-news", Name: "c"}
	trouble := types.NamespacedName{Namespace: "team-trouble", Name: "c"}
	h.Generic(context.Background(), event.TypedGenericEvent[probe.Wake]{Object: probe.Wake{Key: news}}, q)
	h.Generic(context.Background(), event.TypedGenericEvent[probe.Wake]{Object: probe.Wake{Key: trouble, Urgent: true}}, q)
	for _, want := range []types.NamespacedName{trouble, news} {
		got, _, _ := q.GetWithPriority()
		q.Done(got)
		if got.NamespacedName != want {
			t.Fatalf("took %s, want %s", got.NamespacedName, want)
		}
	}
}
