package daytwo

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// TestAWaitWithNothingToProbeBacksOff: a waiting cluster is planned again
// every probe period, except when no pod has an address and no operation
// runs: then only the pod watch (or the routine recheck) wakes it.
func TestAWaitWithNothingToProbeBacksOff(t *testing.T) {
	const period = 250 * time.Millisecond
	for _, tc := range []struct {
		name string
		ips  []string
		op   *cachev1alpha1.OperationStatus
		want time.Duration
	}{
		{"no pod yet", nil, nil, steadyRecheck},
		{"pods not scheduled", []string{"", "", ""}, nil, steadyRecheck},
		{"one pod has an address", []string{"", "10.0.0.1", ""}, nil, period},
		{"an operation keeps its deadlines", []string{"", "", ""}, &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationUpgrade}, period},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
			cc.Status.Operation = tc.op
			s := newScope(cc, nil)
			s.snap.ProbeTimeout = 4 * period
			for _, ip := range tc.ips {
				s.snap.Pods = append(s.snap.Pods, plan.PodState{Name: "c-x", IP: ip})
			}
			if got := waitRecheck(s); got != tc.want {
				t.Errorf("waitRecheck = %s, want %s", got, tc.want)
			}
		})
	}
}
