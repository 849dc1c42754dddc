package change

import (
	"fmt"
	"sort"

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
	if a.IsSharded() {
		return ClusterPlan{Namespace: a.Namespace, Name: a.Name, Change: "created",
			Operations: []PlannedOperation{{Type: "Create", Description: fmt.Sprintf(
				"a new sharded cluster of %d shards × %d pods (%d pods), version %s: day-two meets the nodes, spreads the 16384 slots evenly over the shards' first pods and makes the others their replicas",
				a.ShardCount(), a.PodsPerShard(), a.DesiredReplicas(), a.Spec.Version)}}}
	}
	return ClusterPlan{Namespace: a.Namespace, Name: a.Name, Change: "created",
		Operations: []PlannedOperation{{Type: "Create", Description: fmt.Sprintf("a new cluster of %d pods, version %s", a.DesiredReplicas(), a.Spec.Version)}}}
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
	if p.Rejected = rejected(b, a); len(p.Rejected) > 0 {
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
	return p, nil
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
