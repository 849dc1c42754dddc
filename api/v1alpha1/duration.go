package v1alpha1

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// durationPattern is the Duration field's OpenAPI pattern, read again here
// for values that did not pass through the API server (files read by the
// CLI, objects written under an older schema).
var durationPattern = regexp.MustCompile(`^(?:([0-9]{1,4})d)?(?:([0-9]{1,6})h)?(?:([0-9]{1,7})m)?(?:([0-9]{1,8})s)?$`)

// Parse returns the span d names. An admitted value never fails; a value
// from elsewhere fails with a message that shows the accepted form.
func (d Duration) Parse() (time.Duration, error) {
	m := durationPattern.FindStringSubmatch(string(d))
	if m == nil || d == "" {
		return 0, fmt.Errorf("%q is not a duration such as 7d, 36h, 1d12h, 90m or 45s", string(d))
	}
	var total time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", string(d), err)
		}
		total += time.Duration(n) * unit
	}
	if total <= 0 {
		return 0, fmt.Errorf("%q: a duration must be longer than zero", string(d))
	}
	return total, nil
}
