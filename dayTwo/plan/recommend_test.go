package plan

import (
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
