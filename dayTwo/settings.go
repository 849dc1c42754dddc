// The day-two settings a reconcile derives from the spec and the flags.

package daytwo

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
	"time"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// probeTimeout is spec.highAvailability.probeTimeoutSeconds.
func probeTimeout(cc *cachev1alpha1.CacheCluster) time.Duration {
	if s := cc.Spec.HighAvailability.ProbeTimeoutSeconds; s > 0 {
		return time.Duration(s) * time.Second
	}
	return defaultProbeTimeout
}

// probePeriod looks four times per timeout, so a dead master is noticed
// within a quarter of the timeout after it expires.
func probePeriod(timeout time.Duration) time.Duration {
	p := timeout / 4
	return min(max(p, 100*time.Millisecond), 2*time.Second)
}

// stepDeadline bounds an upgrade's pre-check and each restarted pod.
func (r *Reconciler) stepDeadline() time.Duration {
	if r.StepDeadline > 0 {
		return r.StepDeadline
	}
	return 5 * time.Minute
}

// recreateAfter is how long a pod may stay not-Ready before it is
// recreated: long enough for a large dataset to load from disk.
func (r *Reconciler) recreateAfter(probeTimeout time.Duration) time.Duration {
	if r.RecreateAfter > 0 {
		return r.RecreateAfter
	}
	return max(5*time.Minute, 60*probeTimeout)
}

func autoFailover(cc *cachev1alpha1.CacheCluster) bool {
	ha := cc.Spec.HighAvailability
	if ha.Enabled != nil && !*ha.Enabled {
		return false
	}
	return ha.AutoFailover == nil || *ha.AutoFailover
}

// newID names an operation in the status, logs and Events.
func newID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// waitRecheck is when a waiting cluster is planned again. During an
// operation, and for a wait the planner did not mark OnAnswer, every
// probe period: what it waits for may be an offset catching up or a
// deadline. Otherwise the controller is woken for what ends the wait (the
// prober when a pod's answer changes, the watches, a person's change):
// the routine recheck then, or the wait's Until or the planner's next
// deadline (plan.RecheckAt) if that is sooner. A
// cluster none of whose pods has an address yet has nothing to probe:
// the pod watch wakes it when a pod gets one. Before, a waiting cluster
// was planned every probe period: 1,000 clusters whose pods were not
// scheduled four times a second each, and at 300 clusters starting, 77
// reconciles a second kept every day-two worker busy while failovers
// queued (docs/scale.md).
func waitRecheck(s *scope, now time.Time) time.Duration {
	if s.cc.Status.Operation != nil {
		return probePeriod(s.snap.ProbeTimeout)
	}
	noAddress := !slices.ContainsFunc(s.snap.Pods, func(p plan.PodState) bool { return p.IP != "" })
	if !noAddress && !s.action.OnAnswer {
		return probePeriod(s.snap.ProbeTimeout)
	}
	return recheckBy(steadyRecheck, now, s.action.Until, plan.RecheckAt(s.snap))
}

// recheckBy shortens a requeue to the soonest of the given times (zero
// ones ignored), and never below afterStep.
func recheckBy(d time.Duration, now time.Time, at ...time.Time) time.Duration {
	for _, t := range at {
		if !t.IsZero() {
			d = min(d, max(t.Sub(now), afterStep))
		}
	}
	return d
}
