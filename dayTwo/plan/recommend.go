package plan

import (
	"fmt"
	"time"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Recommend decides the recommendations from the master's last probe. It is
// pure: the window's start comes in and goes out. An existing
// recommendation is kept as it is while pressure lasts, so the status is not
// rewritten on every probe.
func Recommend(master probe.Observation, since, now time.Time, window time.Duration, existing []cachev1alpha1.Recommendation) ([]cachev1alpha1.Recommendation, time.Time) {
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
