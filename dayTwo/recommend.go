package daytwo

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// Memory pressure: the master's used_memory above memoryHigh of maxmemory
// for the whole window gives a recommendation; it is withdrawn once usage
// falls below memoryLow (hysteresis, so it does not flap).
const (
	memoryHigh = 0.80
	memoryLow  = 0.70
	// memoryTarget: the recommended maxmemory puts today's usage at this
	// share of it.
	memoryTarget = 0.60
)

// FieldMaxMemory is the field a memory recommendation changes.
const FieldMaxMemory = "spec.config.maxmemory"

// pressure remembers, per cluster, since when the master is under memory
// pressure. It lives in memory: after an operator restart the window starts
// again.
type pressure struct {
	since map[types.NamespacedName]time.Time
}

// Recommend decides the recommendations from the master's last probe. It is
// pure: the window's start comes in and goes out. An existing
// recommendation is kept as it is while pressure lasts, so the status is not
// rewritten on every probe.
func Recommend(master Observation, since, now time.Time, window time.Duration, existing []cachev1alpha1.Recommendation) ([]cachev1alpha1.Recommendation, time.Time) {
	var current *cachev1alpha1.Recommendation
	for i := range existing {
		if existing[i].Field == FieldMaxMemory {
			current = &existing[i]
		}
	}
	keep := func(rs []cachev1alpha1.Recommendation) []cachev1alpha1.Recommendation {
		var out []cachev1alpha1.Recommendation
		for _, r := range existing {
			if r.Field != FieldMaxMemory {
				out = append(out, r)
			}
		}
		return append(out, rs...)
	}
	if !master.Reachable || master.MaxMemory <= 0 {
		return existing, since
	}
	use := float64(master.UsedMemory) / float64(master.MaxMemory)
	switch {
	case use < memoryLow:
		return keep(nil), time.Time{}
	case use < memoryHigh:
		// Between the marks: nothing starts, nothing is withdrawn.
		return existing, time.Time{}
	}
	if since.IsZero() {
		since = now
	}
	if current != nil {
		if current.Current != fmt.Sprintf("%dmb", master.MaxMemory>>20) {
			// maxmemory changed since: the evidence no longer holds.
			return keep(nil), since
		}
		return existing, since
	}
	if now.Sub(since) < window {
		return existing, since
	}
	want := roundUpMiB(int64(float64(master.UsedMemory) / memoryTarget))
	rec := cachev1alpha1.Recommendation{
		Field: FieldMaxMemory, Current: fmt.Sprintf("%dmb", master.MaxMemory>>20), Recommended: fmt.Sprintf("%dmb", want),
		Reason: fmt.Sprintf("used_memory on the master (%s) stayed above %.0f%% of maxmemory for %s (now %s of %s, %.0f%%); %dmb keeps it at %.0f%%",
			master.Pod, memoryHigh*100, window, mib(master.UsedMemory), mib(master.MaxMemory), use*100, want, memoryTarget*100),
		Since: metav1.NewTime(since),
	}
	return keep([]cachev1alpha1.Recommendation{rec}), since
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// roundUpMiB rounds bytes up to whole MiB, then to a multiple of 8 MiB
// above 64 MiB.
func roundUpMiB(b int64) int64 {
	m := (b + 1<<20 - 1) >> 20
	if m > 64 {
		m = (m + 7) / 8 * 8
	}
	return m
}

// recommend updates status.recommendations from the master's last probe
// and says so in an Event when one appears.
func (r *Reconciler) recommend(ctx context.Context, cc *cachev1alpha1.CacheCluster, master Observation) error {
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
	recs, since := Recommend(master, since, r.now(), window, cc.Status.Recommendations)
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
