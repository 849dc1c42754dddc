package daytwo

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// pressure remembers, per cluster, since when the master is under memory
// pressure. It lives in memory: after an operator restart the window starts
// again.
type pressure struct {
	since map[types.NamespacedName]time.Time
}

// recommend updates status.recommendations from the master's last probe
// and says so in an Event when one appears.
func (r *Reconciler) recommend(s *scope, master probe.Observation) {
	r.recommendWith(s, func(since time.Time, window time.Duration) ([]cachev1alpha1.Recommendation, time.Time) {
		return plan.Recommend(master, since, r.now(), window, s.cc.Status.Recommendations)
	})
}

// recommendShards is recommend for a sharded cluster: from the last probe
// of every shard's master (the pods that serve slots).
func (r *Reconciler) recommendShards(s *scope) {
	var masters []probe.Observation
	for _, p := range s.snap.Pods {
		if c := p.Obs.Cluster; p.Observed && c != nil && c.Myself.Master && len(c.Myself.Slots) > 0 {
			masters = append(masters, p.Obs)
		}
	}
	r.recommendWith(s, func(since time.Time, window time.Duration) ([]cachev1alpha1.Recommendation, time.Time) {
		return plan.RecommendShards(masters, int(s.cc.ShardCount()), since, r.now(), window, s.cc.Status.Recommendations)
	})
}

// recommendWith runs a recommendation rule with the cluster's pressure
// window and writes what changed.
func (r *Reconciler) recommendWith(s *scope, rule func(since time.Time, window time.Duration) ([]cachev1alpha1.Recommendation, time.Time)) {
	cc := s.cc
	r.mu.Lock()
	if r.pressure.since == nil {
		r.pressure.since = map[types.NamespacedName]time.Time{}
	}
	since := r.pressure.since[s.key]
	r.mu.Unlock()
	window := r.RecommendAfter
	if window <= 0 {
		window = 5 * time.Minute
	}
	recs, since := rule(since, window)
	r.mu.Lock()
	r.pressure.since[s.key] = since
	r.mu.Unlock()
	if equality.Semantic.DeepEqual(recs, cc.Status.Recommendations) {
		return
	}
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) { st.Recommendations = recs })
	for _, rec := range recs {
		s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventRecommendation, "Recommend",
			"%s: %s → %s: %s. Apply it with: kubectl cache recommend %s -n %s --repo <checkout> --path <manifest>", rec.Field, rec.Current, rec.Recommended, rec.Reason, cc.Name, cc.Namespace)
	}
}

// setQueued keeps the Queued condition in step with the spec changes that
// wait for the running operation.
func setQueued(s *scope, msg string) {
	cur := meta.FindStatusCondition(s.cc.Status.Conditions, cachev1alpha1.ConditionQueued)
	switch {
	case msg == "" && cur == nil:
		return
	case msg != "" && cur != nil && cur.Message == msg:
		return
	}
	gen := s.cc.Generation
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		if msg == "" {
			meta.RemoveStatusCondition(&st.Conditions, cachev1alpha1.ConditionQueued)
			return
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: cachev1alpha1.ConditionQueued, Status: metav1.ConditionTrue, Reason: cachev1alpha1.ReasonWaitingForOperation,
			Message: msg, ObservedGeneration: gen,
		})
	})
}
