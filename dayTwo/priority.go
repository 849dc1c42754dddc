package daytwo

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// Priorities in the controller's queue (controller-runtime's priority
// queue; higher goes first among the requests that are due). A cluster in
// trouble — its master does not answer, or a failover is under way — goes
// before everything else; the routine recheck of a healthy cluster goes
// after everything else, so hundreds of them never delay a failover.
const (
	priorityTrouble = 100
	priorityNormal  = 0
	priorityRoutine = handler.LowPriority
)

// inTrouble tells whether the cluster may have no working master: the
// recorded master did not answer its last probe, or a failover runs.
func inTrouble(s *scope) bool {
	if op := s.cc.Status.Operation; op != nil && op.Type == cachev1alpha1.OperationFailover {
		return true
	}
	m, ok := s.snap.Pod(s.cc.Status.CurrentMaster)
	return ok && m.Observed && !m.Obs.Reachable
}

// withPriority sets the priority the request is queued again with: a
// request keeps the priority it came with otherwise, and one wake-up for
// a dead master would make every later routine recheck urgent.
func withPriority(s *scope, res ctrl.Result, routine bool) ctrl.Result {
	p := priorityNormal
	switch {
	case s != nil && s.cc != nil && inTrouble(s):
		p = priorityTrouble
	case routine:
		p = priorityRoutine
	}
	res.Priority = &p
	return res
}

// wakeHandler queues the prober's wake-ups: urgent ones ahead of the
// rest.
func wakeHandler() handler.TypedEventHandler[probe.Wake, reconcile.Request] {
	return handler.TypedFuncs[probe.Wake, reconcile.Request]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[probe.Wake], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			req := reconcile.Request{NamespacedName: e.Object.Key}
			pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
			if !ok {
				q.Add(req)
				return
			}
			p := priorityNormal
			if e.Object.Urgent {
				p = priorityTrouble
			}
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: &p}, req)
		},
	}
}
