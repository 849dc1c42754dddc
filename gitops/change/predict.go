package change

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// Predict tells what the change from before to after (as Load returns
// them) does to each CacheCluster, sorted by namespace/name; a cluster
// whose spec and annotations are the same on both sides is left out. live
// says what the running cluster says, asked with the before side of each
// changed cluster.
func Predict(before, after map[string]*cachev1alpha1.CacheCluster, live func(*cachev1alpha1.CacheCluster) Live) ([]ClusterPlan, error) {
	var plans []ClusterPlan
	for _, k := range sortedKeys(before, after) {
		b, a := before[k], after[k]
		switch {
		case b == nil:
			plans = append(plans, created(a))
		case a == nil:
			plans = append(plans, deleted(b))
		case equality.Semantic.DeepEqual(b.Spec, a.Spec) && equality.Semantic.DeepEqual(b.Annotations, a.Annotations):
		default:
			p, err := changedLive(b, a, live(b))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			plans = append(plans, p)
		}
	}
	return plans, nil
}

// sortedKeys is the union of the keys of both sides, sorted.
func sortedKeys(before, after map[string]*cachev1alpha1.CacheCluster) []string {
	keys := map[string]bool{}
	for k := range before {
		keys[k] = true
	}
	for k := range after {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	return sorted
}

func created(a *cachev1alpha1.CacheCluster) ClusterPlan {
	p := ClusterPlan{Namespace: a.Namespace, Name: a.Name, Change: "created"}
	if p.Rejected = rejectedBackup(a); len(p.Rejected) > 0 {
		return p
	}
	switch {
	case a.IsSharded() && a.Spec.Restore != nil:
		p.Operations = []PlannedOperation{{Type: "Create", Description: fmt.Sprintf(
			"a new sharded cluster of %d shards × %d pods (%d pods), version %s, restored from %s: each shard's first pod loads that shard's dump before redis-server starts and its other pods replicate it; day-two meets the nodes, gives each shard the slots the backup recorded and checks each shard's keys and slots against the backup (condition Restored) before labelling the pods. The backup must hold %d shards (Stalled otherwise); a layout off the even spread is moved to it afterwards",
			a.ShardCount(), a.PodsPerShard(), a.DesiredReplicas(), a.Spec.Version, restoreSource(a.Spec.Restore), a.ShardCount())}}
	case a.IsSharded():
		p.Operations = []PlannedOperation{{Type: "Create", Description: fmt.Sprintf(
			"a new sharded cluster of %d shards × %d pods (%d pods), version %s: day-two meets the nodes, spreads the 16384 slots evenly over the shards' first pods and makes the others their replicas",
			a.ShardCount(), a.PodsPerShard(), a.DesiredReplicas(), a.Spec.Version)}}
	case a.Spec.Restore != nil:
		p.Operations = []PlannedOperation{{Type: "Create", Description: fmt.Sprintf(
			"a new cluster of %d pods, version %s, restored from %s: every pod loads the dump before redis-server starts; the master's key count is checked against the backup (condition Restored) before it is labelled",
			a.DesiredReplicas(), a.Spec.Version, restoreSource(a.Spec.Restore))}}
	default:
		p.Operations = []PlannedOperation{{Type: "Create", Description: fmt.Sprintf("a new cluster of %d pods, version %s", a.DesiredReplicas(), a.Spec.Version)}}
	}
	if op := shardedBackups(nil, a); op != nil {
		p.Operations = append(p.Operations, *op)
	}
	return p
}

// restoreSource names what spec.restore restores.
func restoreSource(r *cachev1alpha1.RestoreSpec) string {
	loc := cachev1alpha1.BackupLocation{S3: r.S3, PVC: r.PVC, Key: r.Key}
	if r.Backup != "" {
		return "CacheBackup " + r.Backup
	}
	return loc.String()
}

// rejectedBackup lists what admission refuses in the backup and restore
// of a sharded cluster (the CRD's rules, in their words).
func rejectedBackup(a *cachev1alpha1.CacheCluster) []string {
	r := a.Spec.Restore
	switch {
	case a.IsSharded() && a.Spec.Backup.AutoRestore:
		return []string{"backup.autoRestore: rejected at admission, disaster recovery in place is not supported for a sharded cluster; restore a backup into a new sharded CacheCluster with spec.restore instead"}
	case r != nil && r.Key != "" && a.IsSharded() && !cachev1alpha1.IsShardedKey(r.Key):
		return []string{"restore.key: rejected at admission, a sharded cluster restores a sharded cluster's backup, whose key is its folder and ends in /"}
	case r != nil && r.Key != "" && !a.IsSharded() && cachev1alpha1.IsShardedKey(r.Key):
		return []string{"restore.key: rejected at admission, a key ending in / names a sharded cluster's backup, which only a mode: sharded cluster with its shard count restores"}
	}
	return nil
}

// shardedBackups describes the backups of a sharded cluster whose backup
// settings change (b nil: a new cluster): what one backup of it is.
func shardedBackups(b, a *cachev1alpha1.CacheCluster) *PlannedOperation {
	bs := a.Spec.Backup
	if !a.IsSharded() || (bs.S3 == nil && bs.PVC == nil) || (b != nil && equality.Semantic.DeepEqual(b.Spec.Backup, bs)) {
		return nil
	}
	target := cachev1alpha1.BackupLocation{S3: bs.S3, PVC: bs.PVC}
	prefix := ""
	if bs.S3 != nil {
		prefix = bs.S3.Prefix
	} else {
		prefix = bs.PVC.Prefix
	}
	target.Key = prefix + a.Namespace + "/" + a.Name + "/<backup>/"
	when := "on demand (kubectl cache backup " + a.Name + ")"
	if bs.Enabled {
		when = "on schedule " + bs.Schedule + " and on demand"
	}
	return &PlannedOperation{Type: "Backup", Description: fmt.Sprintf(
		"backups %s to %s: one dump per shard (%d shards), each from an in-sync replica of the shard, all asked for at once and recorded in one CacheBackup with each shard's slots; each dump is one point in time of its shard, not one of the whole cluster; a backup waits for a resharding, and a resharding for a backup that streams",
		when, target, a.ShardCount())}
}

func deleted(b *cachev1alpha1.CacheCluster) ClusterPlan {
	msg := "pods deleted; their data is deleted too"
	if b.Spec.Storage.RetainOnDelete {
		msg = "pods deleted; the PersistentVolumeClaims are kept (storage.retainOnDelete)"
	}
	return ClusterPlan{Namespace: b.Namespace, Name: b.Name, Change: "deleted",
		Operations: []PlannedOperation{{Type: "Delete", Description: msg}}}
}

// changedLive predicts the change from b to a on the cluster st
// describes. When st holds the live object, the plan starts from the live
// spec, not from b, and lists how the two differ as Drift: merging the
// change takes the cluster from what runs to a, whatever git said before.
func changedLive(b, a *cachev1alpha1.CacheCluster, st Live) (ClusterPlan, error) {
	from := b
	var drift []string
	if st.Object != nil {
		var err error
		if drift, err = Drift(b, st.Object); err != nil {
			return ClusterPlan{}, err
		}
		if from, err = WithDefaults(st.Object); err != nil {
			return ClusterPlan{}, err
		}
		if a, err = WithDefaults(a); err != nil {
			return ClusterPlan{}, err
		}
	}
	p, err := changed(from, a, st.Master)
	if err != nil {
		return p, err
	}
	p.Drift = drift
	if st.Object != nil && len(p.Rejected) == 0 && len(p.Operations) == 0 && len(p.Objects) == 0 {
		p.Warnings = append(p.Warnings, "live: the cluster already runs the spec of --head; merging changes nothing")
	}
	p.Warnings = append(p.Warnings, st.Notes...)
	return p, nil
}

// changed predicts a change to the spec or annotations of a cluster whose
// master is master: what admission refuses, what will not apply as
// written, the rendered objects that change and the day-two operations.
func changed(b, a *cachev1alpha1.CacheCluster, master string) (ClusterPlan, error) {
	p := ClusterPlan{Namespace: a.Namespace, Name: a.Name, Change: "changed"}
	if p.Rejected = append(rejected(b, a), rejectedBackup(a)...); len(p.Rejected) > 0 {
		return p, nil
	}
	p.Warnings = warnings(b, a)

	// The rendered objects, from spec (what the cluster converges to).
	diffs, templateChanged, err := objectDiffs(b, a)
	if err != nil {
		return p, err
	}
	p.Objects = diffs

	if p.Operations, err = simulate(b, a, master, templateChanged); err != nil {
		return p, err
	}
	if len(p.Operations) == 0 && len(p.Objects) > 0 {
		p.Operations = append(p.Operations, PlannedOperation{Type: "Apply", Description: "objects change; no pod restarts"})
	}
	if op := shardedBackups(b, a); op != nil {
		p.Operations = append(p.Operations, *op)
	}
	if op := usersChange(b, a, templateChanged); op != nil {
		p.Operations = append(p.Operations, *op)
	}
	return p, nil
}

// usersChange describes a change of spec.users: applied live on every
// pod by day-two (ACL SETUSER). The first users, or removing the last,
// also change the pod template (the ACL file, the replicas' and probes'
// user): the rolling restart planned with them then restarts every pod.
func usersChange(b, a *cachev1alpha1.CacheCluster, templateChanged bool) *PlannedOperation {
	if equality.Semantic.DeepEqual(b.Spec.Users, a.Spec.Users) {
		return nil
	}
	var msg string
	switch {
	case len(b.Spec.Users) == 0:
		msg = fmt.Sprintf("%d users applied live on every pod (ACL SETUSER); the default user is switched off on each pod once it has restarted with the ACL file (Secret %s-users), and clients must then authenticate as a user", len(a.Spec.Users), a.Name)
	case len(a.Spec.Users) == 0:
		msg = "users removed live on every pod: the default user is on again with the cluster's password"
	default:
		var added, removed, changed []string
		before := map[string]cachev1alpha1.UserSpec{}
		for _, u := range b.Spec.Users {
			before[u.Name] = u
		}
		for _, u := range a.Spec.Users {
			old, ok := before[u.Name]
			switch {
			case !ok:
				added = append(added, u.Name)
			case !equality.Semantic.DeepEqual(old, u):
				changed = append(changed, u.Name)
			}
			delete(before, u.Name)
		}
		for name := range before {
			removed = append(removed, name)
		}
		sort.Strings(removed)
		var parts []string
		for _, x := range []struct {
			what  string
			names []string
		}{{"added", added}, {"changed", changed}, {"removed", removed}} {
			if len(x.names) > 0 {
				parts = append(parts, x.what+" "+strings.Join(x.names, ", "))
			}
		}
		msg = "users " + strings.Join(parts, "; ") + ": applied live on every pod (ACL SETUSER)"
	}
	if templateChanged {
		msg += "; the pod template changes too: every pod restarts in the rollout planned here"
	} else {
		msg += ", no restart"
	}
	return &PlannedOperation{Type: "ApplyUsers", Description: msg}
}

// rejected lists the first change to an immutable field, which the API
// server refuses at admission.
func rejected(b, a *cachev1alpha1.CacheCluster) []string {
	if !equality.Semantic.DeepEqual(b.Spec.Storage.ClassName, a.Spec.Storage.ClassName) {
		return []string{"storage.className: rejected at admission, it is immutable (create a new CacheCluster and restore a backup instead)"}
	}
	if !equality.Semantic.DeepEqual(b.Spec.Restore, a.Spec.Restore) {
		return []string{"restore: rejected at admission, it is immutable (it applies only when a cluster is created)"}
	}
	return rejectedSharded(b, a)
}

// rejectedSharded lists a change of a cluster's mode or shard layout
// that admission refuses (a change of spec.shards is resharding, which
// simulate plans).
func rejectedSharded(b, a *cachev1alpha1.CacheCluster) []string {
	switch {
	case b.IsSharded() != a.IsSharded():
		return []string{"mode: rejected at admission, it is immutable (create a new CacheCluster with the mode you want)"}
	case a.IsSharded() && a.ShardCount() < 3:
		return []string{fmt.Sprintf("shards %d: rejected at admission, a sharded cluster has at least 3 shards", a.ShardCount())}
	case a.IsSharded() && b.ReplicasPerShard() != a.ReplicasPerShard():
		return []string{fmt.Sprintf("replicasPerShard %d→%d: rejected at admission, it cannot change yet (issue 15)", b.ReplicasPerShard(), a.ReplicasPerShard())}
	}
	return nil
}

// warnings lists the changes that will not be applied as written.
func warnings(b, a *cachev1alpha1.CacheCluster) []string {
	var w []string
	if !equality.Semantic.DeepEqual(b.Spec.Storage.Size, a.Spec.Storage.Size) {
		w = append(w, "storage.size: Kubernetes refuses to change a StatefulSet's volume claim template; the operator will report Stalled (ApplyFailed) and the claims keep their size")
	}
	if a.Spec.Paused {
		w = append(w, "paused: the operator changes nothing while spec.paused is set")
	}
	return w
}
