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

// waitRecheck is when a waiting cluster is planned again: every probe
// period, as what it waits for may be a pod's answer or a timeout; but
// when no pod has an address yet and no operation runs, there is nothing
// to probe and no deadline to keep, and the pod watch wakes the cluster
// when a pod gets one. Without that, a fleet of clusters whose pods are
// not scheduled reconciled four times a second each (docs/scale.md).
func waitRecheck(s *scope) time.Duration {
	if s.cc.Status.Operation == nil && !slices.ContainsFunc(s.snap.Pods, func(p plan.PodState) bool { return p.IP != "" }) {
		return steadyRecheck
	}
	return probePeriod(s.snap.ProbeTimeout)
}
