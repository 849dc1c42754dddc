package daytwo

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// The steps of a sharded cluster (plan/sharded.go orders them): nodes
// meet, slots are given to a shard's master, the shard's other pods
// replicate it, status.shards and ShardsReady say what the nodes report.

// clusterMeet has a.Pod's node meet a.Master's (CLUSTER MEET ip 6379).
func (r *Reconciler) clusterMeet(ctx context.Context, s *scope, a plan.Action) error {
	p, _ := s.snap.Pod(a.Pod)
	other, ok := s.snap.Pod(a.Master)
	if !ok || other.IP == "" {
		return fmt.Errorf("%s has no address", a.Master)
	}
	c := redisClient(p.IP, s.access)
	defer c.Close()
	return c.ClusterMeet(ctx, other.IP, "6379").Err()
}

// clusterAddSlots gives a.Pod's node the slots of a.Slots (CLUSTER
// ADDSLOTSRANGE).
func (r *Reconciler) clusterAddSlots(ctx context.Context, s *scope, a plan.Action) error {
	p, _ := s.snap.Pod(a.Pod)
	c := redisClient(p.IP, s.access)
	defer c.Close()
	for _, sr := range a.Slots {
		if err := c.ClusterAddSlotsRange(ctx, sr.Start, sr.End).Err(); err != nil {
			return fmt.Errorf("CLUSTER ADDSLOTSRANGE %d %d: %w", sr.Start, sr.End, err)
		}
	}
	return nil
}

// clusterReplicate makes a.Pod's node a replica of a.Master's node
// (CLUSTER REPLICATE node-id).
func (r *Reconciler) clusterReplicate(ctx context.Context, s *scope, a plan.Action) error {
	p, _ := s.snap.Pod(a.Pod)
	m, ok := s.snap.Pod(a.Master)
	if !ok || m.Obs.Cluster == nil {
		return fmt.Errorf("the node of %s is not known", a.Master)
	}
	c := redisClient(p.IP, s.access)
	defer c.Close()
	return c.ClusterReplicate(ctx, m.Obs.Cluster.Myself.ID).Err()
}

// recordShards writes status.shards, with an Event for each shard whose
// master changed.
func (r *Reconciler) recordShards(_ context.Context, s *scope, a plan.Action) error {
	before := map[int32]string{}
	for _, sh := range s.cc.Status.Shards {
		before[sh.Index] = sh.Master
	}
	op := s.cc.Status.Operation
	for _, sh := range a.Shards {
		old, ok := before[sh.Index]
		switch {
		case !ok || old == sh.Master:
		case plan.InSwitchover(op) && old == op.FromPod && sh.Master == op.ToPod:
			// The switchover of a rolling restart, not a failure.
			s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventShardMasterChanged, "Switchover", "Shard %d is served by %s instead of %s (%s %s)", sh.Index, sh.Master, old, op.Type, op.ID)
		case sh.Master == "":
			s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventShardMasterChanged, "Failover", "Shard %d lost its master %s; no node serves its slots", sh.Index, old)
		case old == "":
			s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventShardMasterChanged, "Failover", "Shard %d is served by %s", sh.Index, sh.Master)
		default:
			s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventShardMasterChanged, "Failover", "Shard %d is served by %s instead of %s", sh.Index, sh.Master, old)
		}
	}
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) { st.Shards = a.Shards })
	return nil
}

// setShardsReady keeps the ShardsReady condition of a sharded cluster in
// step with what its nodes report.
func setShardsReady(s *scope) {
	if s.snap.Sharded == nil {
		return
	}
	status, reason, msg := metav1.ConditionTrue, cachev1alpha1.ReasonAllSlotsServed, "Every node reports cluster_state:ok with all 16384 slots served"
	if why := plan.ShardedHealth(s.snap); why != "" {
		status, reason, msg = metav1.ConditionFalse, cachev1alpha1.ReasonSlotsNotServed, why
	}
	if cur := meta.FindStatusCondition(s.cc.Status.Conditions, cachev1alpha1.ConditionShardsReady); cur != nil &&
		cur.Status == status && cur.Reason == reason && cur.Message == msg && cur.ObservedGeneration == s.cc.Generation {
		return
	}
	gen := s.cc.Generation
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: cachev1alpha1.ConditionShardsReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
	})
}
