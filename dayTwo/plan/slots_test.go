package plan

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/cacheops/cacheops/dayTwo/probe"
)

// An even spread covers every slot exactly once, in consecutive ranges
// whose sizes differ by at most one.
func TestEvenSlots(t *testing.T) {
	tests := []struct {
		n    int
		want []probe.SlotRange
	}{
		{3, []probe.SlotRange{rng(0, 5461), rng(5462, 10922), rng(10923, 16383)}},
		{4, []probe.SlotRange{rng(0, 4095), rng(4096, 8191), rng(8192, 12287), rng(12288, 16383)}},
		{5, []probe.SlotRange{rng(0, 3276), rng(3277, 6553), rng(6554, 9830), rng(9831, 13107), rng(13108, 16383)}},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		var got []probe.SlotRange
		for i := range tt.n {
			got = append(got, EvenSlots(i, tt.n))
		}
		g.Expect(got).To(Equal(tt.want))
	}
	for n := 3; n <= 64; n++ {
		g := NewWithT(t)
		next, smallest, largest := 0, 1<<30, 0
		for i := range n {
			r := EvenSlots(i, n)
			g.Expect(r.Start).To(Equal(next), "n=%d shard %d", n, i)
			next = r.End + 1
			smallest, largest = min(smallest, r.Len()), max(largest, r.Len())
		}
		g.Expect(next).To(Equal(16384), "n=%d", n)
		g.Expect(largest-smallest).To(BeNumerically("<=", 1), "n=%d", n)
	}
}

func TestSlotSetMissing(t *testing.T) {
	g := NewWithT(t)
	var s slotSet
	s.add(probe.SlotRange{Start: 0, End: 9}, probe.SlotRange{Start: 12, End: 12}, probe.SlotRange{Start: 16383, End: 16383})
	g.Expect(s.missing(probe.SlotRange{Start: 0, End: 15})).To(Equal([]probe.SlotRange{rng(10, 11), rng(13, 15)}))
	g.Expect(s.missing(probe.SlotRange{Start: 0, End: 9})).To(BeEmpty())
	g.Expect(SlotStrings(s.missing(probe.SlotRange{Start: 16380, End: 16383}))).To(Equal([]string{"16380-16382"}))
}

// rng is the slot range from a to b.
func rng(a, b int) probe.SlotRange { return probe.SlotRange{Start: a, End: b} }
