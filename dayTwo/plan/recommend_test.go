package plan

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

func TestRecommendAfterSustainedMemoryPressure(t *testing.T) {
	g := NewWithT(t)
	obs := func(used, max int64) probe.Observation {
		return probe.Observation{Pod: "c-0", Reachable: true, UsedMemory: used << 20, MaxMemory: max << 20}
	}
	window := 5 * time.Minute

	// Pressure starts: nothing yet, the window opens.
	recs, since := Recommend(obs(85, 100), time.Time{}, now, window, nil)
	g.Expect(recs).To(BeEmpty())
	g.Expect(since).To(Equal(now))

	// Not long enough.
	recs, since = Recommend(obs(90, 100), since, now.Add(4*time.Minute), window, nil)
	g.Expect(recs).To(BeEmpty())

	// Long enough: one recommendation with its evidence.
	recs, since = Recommend(obs(90, 100), since, now.Add(5*time.Minute+time.Second), window, nil)
	g.Expect(recs).To(HaveLen(1))
	g.Expect(recs[0].Field).To(Equal(FieldMaxMemory))
	g.Expect(recs[0].Current).To(Equal("100mb"))
	g.Expect(recs[0].Recommended).To(Equal("152mb"))
	g.Expect(recs[0].Reason).To(ContainSubstring("stayed above 80% of maxmemory for 5m0s"))
	g.Expect(recs[0].Since.Time).To(Equal(now))

	// Kept as it is while pressure lasts, even when usage moves.
	again, _ := Recommend(obs(95, 100), since, now.Add(10*time.Minute), window, recs)
	g.Expect(again).To(Equal(recs))

	// Between the marks: kept; below the low mark: withdrawn.
	again, since = Recommend(obs(75, 100), since, now.Add(11*time.Minute), window, recs)
	g.Expect(again).To(Equal(recs))
	g.Expect(since.IsZero()).To(BeTrue())
	again, _ = Recommend(obs(50, 100), since, now.Add(12*time.Minute), window, recs)
	g.Expect(again).To(BeEmpty())

	// A dip below the high mark restarts the window.
	_, since = Recommend(obs(85, 100), time.Time{}, now, window, nil)
	_, since = Recommend(obs(78, 100), since, now.Add(3*time.Minute), window, nil)
	recs, _ = Recommend(obs(85, 100), since, now.Add(6*time.Minute), window, nil)
	g.Expect(recs).To(BeEmpty())

	// No maxmemory (unlimited) or an unreachable master: no opinion.
	recs, _ = Recommend(obs(85, 0), now.Add(-time.Hour), now, window, nil)
	g.Expect(recs).To(BeEmpty())
	other := []cachev1alpha1.Recommendation{{Field: "spec.replicas"}}
	recs, _ = Recommend(probe.Observation{}, now.Add(-time.Hour), now, window, other)
	g.Expect(recs).To(Equal(other))
}

// A sharded cluster grows by shards: the fullest master decides, the
// recommendation is enough shards to put today's data at 60% of each
// master, at least one more, at most 64.
func TestRecommendShards(t *testing.T) {
	obs := func(pod string, used, max int64) probe.Observation {
		return probe.Observation{Pod: pod, Reachable: true, UsedMemory: used << 20, MaxMemory: max << 20}
	}
	window := 5 * time.Minute
	late := now.Add(window + time.Second)
	tests := []struct {
		name      string
		masters   []probe.Observation
		shards    int
		existing  []cachev1alpha1.Recommendation
		want      string // recommended shard count; "" none
		wantSince bool   // the window stays open (or unchanged)
	}{
		{name: "every master below the low mark", masters: []probe.Observation{obs("s-0", 50, 100), obs("s-2", 60, 100), obs("s-4", 40, 100)}, shards: 3},
		{name: "one master above the high mark: one shard more is enough", shards: 3, wantSince: true, want: "5",
			masters: []probe.Observation{obs("s-0", 50, 100), obs("s-2", 85, 100), obs("s-4", 40, 100)}},
		{name: "ten shards at 81%: fourteen", shards: 10, wantSince: true, want: "14",
			masters: []probe.Observation{obs("s-0", 81, 100)}},
		{name: "far above: enough shards for 60%", shards: 3, wantSince: true, want: "5",
			masters: []probe.Observation{obs("s-0", 99, 100), obs("s-2", 98, 100), obs("s-4", 97, 100)}},
		{name: "at most 64", shards: 60, wantSince: true, want: "64",
			masters: []probe.Observation{obs("s-0", 99, 100)}},
		{name: "at 64 already: nothing to recommend", shards: 64, wantSince: true,
			masters: []probe.Observation{obs("s-0", 99, 100)}},
		{name: "a master that does not answer: no opinion, the window unchanged", shards: 3, wantSince: true,
			masters: []probe.Observation{obs("s-0", 99, 100), {Pod: "s-2"}}},
		{name: "no maxmemory: no opinion, the window unchanged", shards: 3, wantSince: true,
			masters: []probe.Observation{obs("s-0", 99, 0)}},
		{name: "made for another shard count: withdrawn", shards: 4, wantSince: true,
			masters:  []probe.Observation{obs("s-0", 90, 100)},
			existing: []cachev1alpha1.Recommendation{{Field: FieldShards, Current: "3", Recommended: "5"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			recs, since := RecommendShards(tt.masters, tt.shards, now, late, window, tt.existing)
			g.Expect(since.IsZero()).To(Equal(!tt.wantSince))
			if tt.want == "" {
				g.Expect(recs).To(BeEmpty())
				return
			}
			g.Expect(recs).To(HaveLen(1))
			g.Expect(recs[0].Field).To(Equal(FieldShards))
			g.Expect(recs[0].Current).To(Equal(fmt.Sprint(tt.shards)))
			g.Expect(recs[0].Recommended).To(Equal(tt.want))
			g.Expect(recs[0].Reason).To(ContainSubstring("stayed above 80% of maxmemory for 5m0s"))
			g.Expect(recs[0].Since.Time).To(Equal(now))
		})
	}

	// Not before the window has passed; kept while pressure lasts.
	g := NewWithT(t)
	hot := []probe.Observation{obs("s-0", 90, 100), obs("s-2", 70, 100), obs("s-4", 70, 100)}
	recs, since := RecommendShards(hot, 3, time.Time{}, now, window, nil)
	g.Expect(recs).To(BeEmpty())
	recs, since = RecommendShards(hot, 3, since, late, window, nil)
	g.Expect(recs).To(HaveLen(1))
	g.Expect(recs[0].Reason).To(ContainSubstring("s-0"))
	hotter := []probe.Observation{obs("s-0", 99, 100), obs("s-2", 70, 100), obs("s-4", 70, 100)}
	again, _ := RecommendShards(hotter, 3, since, late.Add(time.Minute), window, recs)
	g.Expect(again).To(Equal(recs))
}
