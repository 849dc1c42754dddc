package v1alpha1

import "testing"

func TestParseSchedule(t *testing.T) {
	for _, ok := range []string{"0 3 * * *", "@daily", "@every 6h", "*/15 * * * 1-5"} {
		if _, err := ParseSchedule(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"61 * * * *", "0 0 30 2 *", "@fortnightly"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("%q must be refused", bad)
		}
	}
}
