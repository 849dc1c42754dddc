package change

import (
	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

// rendered is one side of a change as the renderer makes it.
type rendered struct {
	// objects are the objects' YAML by kind/name.
	objects map[string]string
	// order is the kind/name of each object, in the renderer's order.
	order []string
	// template is the cache pods' template (the StatefulSet named after
	// the cluster, not the backup store's).
	template any
}

// objectDiffs renders both sides and diffs the objects that differ. It
// also tells whether the StatefulSet's pod template differs: day-two then
// restarts the pods onto the new one, even when what changes (the restore
// init container of backup.autoRestore, a probe) is none of the values it
// approves.
func objectDiffs(b, a *cachev1alpha1.CacheCluster) ([]ObjectDiff, bool, error) {
	before, err := render(b)
	if err != nil {
		return nil, false, err
	}
	after, err := render(a)
	if err != nil {
		return nil, false, err
	}
	order := before.order
	for _, k := range after.order {
		if _, ok := before.objects[k]; !ok {
			order = append(order, k)
		}
	}
	var diffs []ObjectDiff
	for _, k := range order {
		if before.objects[k] == after.objects[k] {
			continue
		}
		d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(before.objects[k]), B: difflib.SplitLines(after.objects[k]),
			FromFile: "base/" + k, ToFile: "head/" + k, Context: 2,
		})
		diffs = append(diffs, ObjectDiff{Object: k, Diff: d})
	}
	return diffs, !equality.Semantic.DeepEqual(before.template, after.template), nil
}

// render renders cc with the default capabilities.
func render(cc *cachev1alpha1.CacheCluster) (rendered, error) {
	objs, err := renderer.Render(cc, renderer.DefaultCapabilities())
	if err != nil {
		return rendered{}, err
	}
	r := rendered{objects: map[string]string{}}
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			return rendered{}, err
		}
		k := o.GetKind() + "/" + o.GetName()
		r.objects[k] = string(y)
		r.order = append(r.order, k)
		if o.GetKind() == "StatefulSet" && o.GetName() == cc.Name { // the cache pods', not the backup store's
			r.template, _, _ = unstructured.NestedFieldNoCopy(o.Object, "spec", "template")
		}
	}
	return r, nil
}
