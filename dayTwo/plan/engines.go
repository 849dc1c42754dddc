package plan

import (
	"fmt"
	"strings"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// Engine and version changes follow what can replicate from what: a
// server reads RDB data of its own format version and older ones, never
// newer (cachev1alpha1.EngineVersions). An upgrade to a version with a
// newer RDB format is therefore one way: the replicas restart on the new
// version first (they can still full-sync from the old master), then a
// switchover hands the master role to an upgraded replica, the old master
// restarts last. Until that switchover a failed pod rolls the upgrade back;
// from it on the master writes data the previous version cannot read, and
// going back is refused.

// rdbOf is the RDB format version values run; 0 when the engine version
// is not in the table (the renderer stalls such a spec).
func rdbOf(v cachev1alpha1.RolloutValues) int {
	ev, ok := cachev1alpha1.LookupEngineVersion(v.Engine, v.Version)
	if !ok {
		return 0
	}
	return ev.RDBVersion
}

// engineName names what values run, for people: "valkey 8.0.1".
func engineName(v cachev1alpha1.RolloutValues) string {
	return string(cachev1alpha1.EngineOrDefault(v.Engine)) + " " + v.Version
}

// oneWay: to writes an RDB format from cannot read.
func oneWay(from, to cachev1alpha1.RolloutValues) bool {
	f, t := rdbOf(from), rdbOf(to)
	return f > 0 && t > f
}

// refuseDowngrade refuses a spec whose RDB format is older than the one the
// pods run: the master's data (and every dump of it) is in a format the
// older version cannot read, so no pod could replicate from the master or
// load its own volume. ok is false when spec is not such a downgrade.
func refuseDowngrade(s Snapshot) (Action, bool) {
	a := *s.Approved
	if !oneWay(s.Spec, a) {
		return Action{}, false
	}
	msg := fmt.Sprintf("Going back from %s to %s is refused: the master runs %s, which writes RDB version %d, and %s reads RDB version %d and older, "+
		"so it could neither replicate from the master nor load the data on its volume. The cluster is left as it is. "+
		"To run %s again, create a new CacheCluster with it and restore a backup taken before the migration (an RDB version %d dump), or set spec back to %s",
		engineName(a), engineName(s.Spec), engineName(a), rdbOf(a), engineName(s.Spec), rdbOf(s.Spec),
		engineName(s.Spec), rdbOf(s.Spec), engineName(a))
	return Action{Type: ActionRefuseChange, Values: s.Spec.DeepCopy(), Reason: msg}, true
}

// pastNoReturn: the upgrade is one way and the master already runs the
// target, so rolling back would leave every restarted pod unable to follow
// the master. master is outdated when it still runs the previous template.
func pastNoReturn(op *cachev1alpha1.OperationStatus, masterOutdated bool) bool {
	return op.Previous != nil && op.Target != nil && oneWay(*op.Previous, *op.Target) && !masterOutdated
}

// noReturn is what the upgrade does when pod fails after the master moved
// to a newer RDB format: it waits for the pod, and says so once in the
// operation's reason (status.operation.reason, which kubectl cache status
// and the Reconciling condition show), not only in a log line.
func noReturn(op *cachev1alpha1.OperationStatus, pod, why string) Action {
	msg := fmt.Sprintf("%s; no rollback: the master runs %s (RDB version %d), which %s cannot replicate from. "+
		"The upgrade waits for the pod; fix what keeps it from starting, or restore a backup into a new cluster",
		why, engineName(*op.Target), rdbOf(*op.Target), engineName(*op.Previous))
	if strings.Contains(op.Reason, msg) {
		return Action{Type: ActionWait, Pod: pod, Reason: msg}
	}
	next := op.DeepCopy()
	next.Reason = op.Reason + " — " + msg
	return Action{Type: ActionNextStep, Pod: pod, Operation: next, Reason: msg}
}

// describeNoReturn says, in an upgrade's description, from which step on
// it cannot be rolled back; empty when it always can.
func describeNoReturn(from, to cachev1alpha1.RolloutValues) string {
	if !oneWay(from, to) {
		return ""
	}
	return fmt.Sprintf("; no rollback after the switchover: %s writes RDB %d, %s reads RDB %d at most", engineName(to), rdbOf(to), engineName(from), rdbOf(from))
}
