package v1alpha1

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// ParseSchedule parses spec.backup.schedule: five cron fields (minute hour
// day-of-month month day-of-week, UTC) or a descriptor (@daily, @hourly,
// @every 6h, ...).
func ParseSchedule(s string) (cron.Schedule, error) {
	sched, err := cron.ParseStandard(s)
	if err != nil {
		return nil, fmt.Errorf("backup.schedule %q: %w", s, err)
	}
	// A date that never comes (0 0 30 2 *): cron gives up after five
	// years of looking.
	if sched.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("backup.schedule %q: never fires (no such date)", s)
	}
	return sched, nil
}
