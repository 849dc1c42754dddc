package change

import (
	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// This is the one file of the package that names the day-two package: the
// operations of a change are the day-two planner's, never a copy of its
// rules.

// simulate asks the day-two planner which operations the change from b to
// a triggers on a cluster whose master is master (empty: ordinal 0), in
// the order they run, with the pods each restarts and its switchovers.
// templateChanged tells whether the cache pods' template differs.
func simulate(b, a *cachev1alpha1.CacheCluster, master string, templateChanged bool) ([]PlannedOperation, error) {
	steps, err := plan.Simulate(b, a, master, templateChanged)
	if err != nil {
		return nil, err
	}
	var ops []PlannedOperation
	var cur *PlannedOperation
	for _, s := range steps {
		switch s.Type {
		case plan.ActionStartOperation:
			ops = append(ops, PlannedOperation{Type: string(s.Operation.Type), Description: s.Reason})
			cur = &ops[len(ops)-1]
		case plan.ActionRestartPod:
			if cur != nil {
				cur.Restarts = append(cur.Restarts, s.Pod)
			}
		case plan.ActionRefuseChange:
			// Refused before anything starts: shown as what it is, with
			// the planner's reason.
			ops = append(ops, PlannedOperation{Type: "Refused", Description: s.Reason})
			cur = nil
		case plan.ActionGracefulSwitchover, plan.ActionShardFailover:
			// A replication master's FAILOVER TO, or a shard's CLUSTER
			// FAILOVER on its replica.
			if cur != nil {
				cur.Switchovers = append(cur.Switchovers, s.Master+"→"+s.Pod)
			}
		}
	}
	return ops, nil
}
