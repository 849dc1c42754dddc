package plan

import (
	"fmt"
	"strconv"
	"strings"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// EvenSlots is the slot range shard i of n serves in an even spread: the
// 16384 slots cut into n consecutive ranges whose sizes differ by at most
// one, the larger ones first (3 shards: 0-5461, 5462-10922, 10923-16383).
func EvenSlots(i, n int) probe.SlotRange {
	base, extra := cachev1alpha1.SlotCount/n, cachev1alpha1.SlotCount%n
	start := i*base + min(i, extra)
	size := base
	if i < extra {
		size++
	}
	return probe.SlotRange{Start: start, End: start + size - 1}
}

// slotSet is a set of slots, one bit per slot.
type slotSet [cachev1alpha1.SlotCount / 64]uint64

func (s *slotSet) add(ranges ...probe.SlotRange) {
	for _, r := range ranges {
		for i := max(r.Start, 0); i <= min(r.End, cachev1alpha1.SlotCount-1); i++ {
			s[i/64] |= 1 << (i % 64)
		}
	}
}

func (s *slotSet) has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }

// missing is the part of r not in s, as ranges.
func (s *slotSet) missing(r probe.SlotRange) []probe.SlotRange {
	var out []probe.SlotRange
	for i := r.Start; i <= r.End; i++ {
		if s.has(i) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].End == i-1 {
			out[n-1].End = i
		} else {
			out = append(out, probe.SlotRange{Start: i, End: i})
		}
	}
	return out
}

// SlotStrings writes ranges as status.shards does: "0-5460", "5461".
func SlotStrings(ranges []probe.SlotRange) []string {
	out := make([]string, 0, len(ranges))
	for _, r := range ranges {
		out = append(out, r.String())
	}
	return out
}

// ParseSlotStrings reads ranges as SlotStrings writes them ("0-5460",
// "5461"), sorted and merged where they touch.
func ParseSlotStrings(ss []string) ([]probe.SlotRange, error) {
	var set slotSet
	for _, r := range ss {
		first, last, isRange := strings.Cut(r, "-")
		if !isRange {
			last = first
		}
		a, errA := strconv.Atoi(first)
		b, errB := strconv.Atoi(last)
		if errA != nil || errB != nil || a < 0 || b < a || b >= cachev1alpha1.SlotCount {
			return nil, fmt.Errorf("%q is not a slot range (such as 0-5461, or 5462)", r)
		}
		set.add(probe.SlotRange{Start: a, End: b})
	}
	return set.ranges(), nil
}

// ranges are the slots of s, as ranges.
func (s *slotSet) ranges() []probe.SlotRange {
	var out []probe.SlotRange
	for i := range cachev1alpha1.SlotCount {
		if !s.has(i) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].End == i-1 {
			out[n-1].End = i
		} else {
			out = append(out, probe.SlotRange{Start: i, End: i})
		}
	}
	return out
}
