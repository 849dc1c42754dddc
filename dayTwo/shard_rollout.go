package daytwo

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// The steps of a sharded cluster's rolling restart that replication mode
// does not have (plan/shard_rollout.go orders them): a shard's switchover
// by CLUSTER FAILOVER on its upgraded replica, and its outcome. The pod
// restarts, the pre-check and the data checks are the replication-mode
// executors.

// shardFailover runs CLUSTER FAILOVER (the coordinated form, without FORCE
// or TAKEOVER) on a.Pod, a replica of a.Master: the master stops its
// clients, the replica waits until it has the master's whole replication
// stream, then wins the masters' vote and takes the slots; the old master
// follows it. Redis gives up after plan.ShardFailoverTimeout; the planner
// reads the outcome from CLUSTER NODES.
func (r *Reconciler) shardFailover(ctx context.Context, s *scope, a plan.Action) error {
	to, ok := s.snap.Pod(a.Pod)
	if !ok || to.IP == "" {
		return fmt.Errorf("%s has no address", a.Pod)
	}
	c := redisClient(to.IP, s.access)
	defer c.Close()
	if err := c.ClusterFailover(ctx).Err(); err != nil {
		return fmt.Errorf("CLUSTER FAILOVER on %s: %w", a.Pod, err)
	}
	r.mu.Lock()
	if r.issued == nil {
		r.issued = map[types.NamespacedName]time.Time{}
	}
	r.issued[s.key] = r.now()
	r.mu.Unlock()
	return nil
}

// endShardSwitchover records a shard's switchover as done (a.Pod serves
// the shard now) or aborted, and the operation's next step; an aborted
// switchover of an upgrade that can still go back approves the previous
// values (the rollback).
func (r *Reconciler) endShardSwitchover(ctx context.Context, s *scope, a plan.Action) error {
	op := s.cc.Status.Operation
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		if a.Values != nil {
			approveValues(st, *a.Values)
		}
		st.Operation = a.Operation
	})
	if err := r.commit(ctx, &s.status); err != nil {
		return err
	}
	r.mu.Lock()
	delete(r.issued, s.key)
	r.mu.Unlock()
	if a.Pod == "" {
		s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventSwitchover, "Switchover", "%s %s: %s", op.Type, op.ID, a.Reason)
		return nil
	}
	took := r.now().Sub(op.StepStartedAt.Time).Round(time.Millisecond)
	ns, name := s.cc.Namespace, s.cc.Name
	s.then(func() { switchovers.WithLabelValues(ns, name).Inc() })
	s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventSwitchover, "Switchover", "%s %s: %s (was %s), switchover took %s", op.Type, op.ID, a.Reason, a.Master, took)
	return nil
}
