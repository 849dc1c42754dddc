package daytwo

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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
func (r *Reconciler) recommend(ctx context.Context, cc *cachev1alpha1.CacheCluster, master probe.Observation) error {
	key := types.NamespacedName{Namespace: cc.Namespace, Name: cc.Name}
	r.mu.Lock()
	if r.pressure.since == nil {
		r.pressure.since = map[types.NamespacedName]time.Time{}
	}
	since := r.pressure.since[key]
	r.mu.Unlock()
	window := r.RecommendAfter
	if window <= 0 {
		window = 5 * time.Minute
	}
	recs, since := plan.Recommend(master, since, r.now(), window, cc.Status.Recommendations)
	r.mu.Lock()
	r.pressure.since[key] = since
	r.mu.Unlock()
	if equality.Semantic.DeepEqual(recs, cc.Status.Recommendations) {
		return nil
	}
	if err := r.patchStatus(ctx, cc, func(st *cachev1alpha1.CacheClusterStatus) { st.Recommendations = recs }); err != nil {
		return err
	}
	for _, rec := range recs {
		r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventRecommendation, "Recommend",
			"%s: %s → %s: %s. Apply it with: kubectl cache recommend %s -n %s --repo <checkout> --path <manifest>", rec.Field, rec.Current, rec.Recommended, rec.Reason, cc.Name, cc.Namespace)
	}
	return nil
}
