package plan

import (
	"time"

	"github.com/robfig/cron/v3"
)

// maxCatchUp bounds the walk over due times missed since the last one.
const maxCatchUp = 1000

// LatestDue is the latest due time in (last, now], if any. After a long
// outage with a frequent schedule it settles for now (truncated to the
// second) instead of walking every missed time.
func LatestDue(sched cron.Schedule, last, now time.Time) (time.Time, bool) {
	var due time.Time
	next := sched.Next(last)
	for i := 0; !next.IsZero() && !next.After(now); i++ {
		if i == maxCatchUp {
			return now.Truncate(time.Second), true
		}
		due, next = next, sched.Next(next)
	}
	return due, !due.IsZero()
}
