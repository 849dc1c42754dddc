package daytwo

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// TestWaitRecheck: a waiting cluster is planned again every probe period
// while an operation runs or when the wait may end with an offset or the
// clock; a wait the prober's wake-up ends (OnAnswer), or one with no pod
// to probe, is rechecked only at the routine recheck, or at its deadline
// (Until), or the planner's next deadline, when that is sooner.
func TestWaitRecheck(t *testing.T) {
	const period = 250 * time.Millisecond
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	answer := plan.Action{Type: plan.ActionWait, OnAnswer: true}
	for _, tc := range []struct {
		name   string
		ips    []string
		op     *cachev1alpha1.OperationStatus
		action plan.Action
		want   time.Duration
	}{
		{"no pod yet", nil, nil, plan.Action{Type: plan.ActionWait}, steadyRecheck},
		{"pods not scheduled", []string{"", "", ""}, nil, plan.Action{Type: plan.ActionWait}, steadyRecheck},
		{"one pod has an address", []string{"", "10.0.0.1", ""}, nil, plan.Action{Type: plan.ActionWait}, period},
		{"an operation keeps its deadlines", []string{"", "", ""}, &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationUpgrade}, plan.Action{Type: plan.ActionWait}, period},
		{"a pod's answer ends it", []string{"10.0.0.1"}, nil, answer, steadyRecheck},
		{"a pod's answer or a deadline ends it", []string{"10.0.0.1"}, nil, plan.Action{Type: plan.ActionWait, OnAnswer: true, Until: now.Add(700 * time.Millisecond)}, 700 * time.Millisecond},
		{"a deadline already past", []string{"10.0.0.1"}, nil, plan.Action{Type: plan.ActionWait, OnAnswer: true, Until: now.Add(-time.Second)}, afterStep},
		{"a deadline later than the routine recheck", []string{"10.0.0.1"}, nil, plan.Action{Type: plan.ActionWait, OnAnswer: true, Until: now.Add(time.Hour)}, steadyRecheck},
		{"a failover polls", []string{"10.0.0.1"}, &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationFailover}, answer, period},
		{"a replica to recreate", []string{"10.0.0.1", "10.0.0.2"}, nil, answer, 5*time.Second + time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
			cc.Status.Operation = tc.op
			s := newScope(cc, nil)
			s.snap.ProbeTimeout = 4 * period
			s.action = tc.action
			for _, ip := range tc.ips {
				s.snap.Pods = append(s.snap.Pods, plan.PodState{Name: "c-x", IP: ip})
			}
			s.snap.Now, s.snap.RecreateAfter = now, time.Minute
			if len(tc.ips) == 2 {
				// Not Ready for 55 s of the minute after which it is
				// recreated.
				s.snap.Pods[1].NotReadySince = now.Add(-55 * time.Second)
			}
			if got := waitRecheck(s, now); got != tc.want {
				t.Errorf("waitRecheck = %s, want %s", got, tc.want)
			}
		})
	}
}
