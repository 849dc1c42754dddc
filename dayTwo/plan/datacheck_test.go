package plan

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A restarted replica's data is read before the rollout goes on
// (datacheck.go).
func TestPlanDataCheckAfterEachRestart(t *testing.T) {
	// c-2 restarted on the new template (run r2-new) and is in sync.
	restarted := func() Snapshot {
		s := setPod(upgrading(cluster(3, 0), "c-2"), "c-2", func(p *PodState) { p.Obs.RunID = "r2-new" })
		return s
	}
	withCheck := func(dc DataCheck) Snapshot {
		s := restarted()
		s.DataChecks["c-2"] = dc
		return s
	}
	passed := DataCheck{RunID: "r2-new", Master: "c-0", Sampled: 32, At: now}
	runPlanCases(t, []planCase{
		{
			name: "a restarted replica is checked before the next restart", want: ActionCheckData, pod: "c-2", given: restarted(),
			check: func(g Gomega, a Action) { g.Expect(a.Master).To(Equal("c-0")) },
		},
		{name: "it passed: the next replica restarts", want: ActionRestartPod, pod: "c-1", given: withCheck(passed)},
		{
			name: "a check of an earlier run does not count", want: ActionCheckData, pod: "c-2",
			given: withCheck(DataCheck{RunID: "r2-old", Master: "c-0", Sampled: 32}),
		},
		{
			name: "a check against another master does not count", want: ActionCheckData, pod: "c-2",
			given: withCheck(DataCheck{RunID: "r2-new", Master: "c-1", Sampled: 32}),
		},
		{
			name: "a check that could not be made waits, then is made again", want: ActionWait, pod: "c-2",
			given: withCheck(DataCheck{RunID: "r2-new", Master: "c-0", Err: "c-2 did not reach offset 500 within 5s", At: now}),
		},
		{
			name: "…made again after the retry delay", want: ActionCheckData, pod: "c-2",
			given: withCheck(DataCheck{RunID: "r2-new", Master: "c-0", Err: "timeout", At: now.Add(-3 * time.Second)}),
		},
		{
			name: "keys missing: the rollout stops with the keys named", want: ActionWait, pod: "c-2",
			given: withCheck(DataCheck{RunID: "r2-new", Master: "c-0", Offset: 900, Sampled: 32, Missing: []string{"a", "b", "c", "d", "e", "f", "g"}}),
			check: func(g Gomega, a Action) {
				g.Expect(a.Reason).To(HavePrefix("c-2 lacks 7 of the 32 keys sampled on the master c-0 (a, b, c, d, e and 2 more), which the master still holds after c-2 reached its offset 900; the rollout stops here"))
			},
		},
		{
			name: "the operation completes only once the last pod passed", want: ActionCheckData, pod: "c-0",
			given: func() Snapshot {
				// After the switchover to c-1, c-0 restarted and follows it.
				s := upgrading(cluster(3, 1), "c-0", "c-1", "c-2")
				s = setPod(s, "c-0", func(p *PodState) { p.Obs.RunID = "r0-new" })
				return s
			}(),
		},
		{
			name: "a master's own run is never checked", want: ActionCompleteOperation,
			given: func() Snapshot {
				s := upgrading(cluster(3, 0), "c-0", "c-1", "c-2")
				s = setPod(s, "c-0", func(p *PodState) { p.Obs.RunID = "r0-new" })
				return s
			}(),
		},
	})
}
