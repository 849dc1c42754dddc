package plan

import (
	"fmt"
	"math"
	"strconv"
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

// FieldShards is the field a sharded cluster's memory recommendation
// changes: more shards, each holding a smaller part of the slots.
const FieldShards = "spec.shards"

// maxShards is spec.shards' admission maximum.
const maxShards = 64

// Recommend decides the recommendations from the master's last probe. It is
// pure: the window's start comes in and goes out. An existing
// recommendation is kept as it is while pressure lasts, so the status is not
// rewritten on every probe.
func Recommend(master probe.Observation, since, now time.Time, window time.Duration, existing []cachev1alpha1.Recommendation) ([]cachev1alpha1.Recommendation, time.Time) {
	if !master.Reachable || master.MaxMemory <= 0 {
		return existing, since
	}
	use := float64(master.UsedMemory) / float64(master.MaxMemory)
	current := fmt.Sprintf("%dmb", master.MaxMemory>>20)
	return recommendMemory(FieldMaxMemory, current, use, since, now, window, existing, func() cachev1alpha1.Recommendation {
		want := roundUpMiB(int64(float64(master.UsedMemory) / memoryTarget))
		return cachev1alpha1.Recommendation{
			Field: FieldMaxMemory, Current: current, Recommended: fmt.Sprintf("%dmb", want),
			Reason: fmt.Sprintf("used_memory on the master (%s) stayed above %.0f%% of maxmemory for %s (now %s of %s, %.0f%%); %dmb keeps it at %.0f%%",
				master.Pod, memoryHigh*100, window, mib(master.UsedMemory), mib(master.MaxMemory), use*100, want, memoryTarget*100),
		}
	})
}

// RecommendShards is Recommend for a sharded cluster of shards shards:
// masters are the shards' masters as last probed. The fullest master
// decides: above memoryHigh of its maxmemory for the window, the
// recommendation is more shards, enough that today's data, spread evenly
// over them, fills memoryTarget of each master (at least one more, at
// most spec.shards' maximum). A sharded cluster grows by shards, not by
// maxmemory: a shard is one master's memory, and resharding moves part
// of every shard's slots to the new ones. None while a master does not
// answer (its usage is not known) or at the maximum.
func RecommendShards(masters []probe.Observation, shards int, since, now time.Time, window time.Duration, existing []cachev1alpha1.Recommendation) ([]cachev1alpha1.Recommendation, time.Time) {
	if len(masters) == 0 || shards <= 0 {
		return existing, since
	}
	var fullest probe.Observation
	use := -1.0
	for _, m := range masters {
		if !m.Reachable || m.MaxMemory <= 0 {
			return existing, since
		}
		if u := float64(m.UsedMemory) / float64(m.MaxMemory); u > use {
			fullest, use = m, u
		}
	}
	current := strconv.Itoa(shards)
	recs, since := recommendMemory(FieldShards, current, use, since, now, window, existing, func() cachev1alpha1.Recommendation {
		want := min(max(shards+1, int(math.Ceil(float64(shards)*use/memoryTarget))), maxShards)
		return cachev1alpha1.Recommendation{
			Field: FieldShards, Current: current, Recommended: strconv.Itoa(want),
			Reason: fmt.Sprintf("used_memory on the master of the fullest shard (%s) stayed above %.0f%% of maxmemory for %s (now %s of %s, %.0f%%); %d shards hold the same data at about %.0f%% each (the slots spread evenly)",
				fullest.Pod, memoryHigh*100, window, mib(fullest.UsedMemory), mib(fullest.MaxMemory), use*100, want, 100*use*float64(shards)/float64(want)),
		}
	})
	for _, r := range recs {
		if r.Field == FieldShards && r.Current == r.Recommended {
			// At the maximum already: no shard can be added.
			return existing, since
		}
	}
	return recs, since
}

// recommendMemory keeps the recommendation of field in step with a
// memory usage use (a share of maxmemory): made by build once use stayed
// above memoryHigh for the window, kept as it is while it was made for
// current, withdrawn below memoryLow.
func recommendMemory(field, current string, use float64, since, now time.Time, window time.Duration, existing []cachev1alpha1.Recommendation, build func() cachev1alpha1.Recommendation) ([]cachev1alpha1.Recommendation, time.Time) {
	var found *cachev1alpha1.Recommendation
	for i := range existing {
		if existing[i].Field == field {
			found = &existing[i]
		}
	}
	keep := func(rs []cachev1alpha1.Recommendation) []cachev1alpha1.Recommendation {
		var out []cachev1alpha1.Recommendation
		for _, r := range existing {
			if r.Field != field {
				out = append(out, r)
			}
		}
		return append(out, rs...)
	}
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
	if found != nil {
		if found.Current != current {
			// The field changed since: the evidence no longer holds.
			return keep(nil), since
		}
		return existing, since
	}
	if now.Sub(since) < window {
		return existing, since
	}
	rec := build()
	rec.Since = metav1.NewTime(since)
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
