package controller

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// controlConflict says why the live object must not be written for cc, or
// "" when it may: it does not exist, cc controls it, or it is a leftover of
// a cluster of the same name (our labels, no controller, e.g. after an
// orphaning delete) that cc adopts. An object another owner controls, or
// one cacheops did not create, is never taken over: a CacheCluster named
// like another cluster's child would otherwise rewrite it, and the two would
// fight over it with every reconcile.
func controlConflict(cc *cachev1alpha1.CacheCluster, kind string, live metav1.Object) string {
	if live == nil {
		return ""
	}
	if ref := metav1.GetControllerOf(live); ref != nil {
		if ref.UID == cc.UID {
			return ""
		}
		return fmt.Sprintf("%s %s is controlled by %s %s", kind, live.GetName(), ref.Kind, ref.Name)
	}
	l := live.GetLabels()
	if l[cachev1alpha1.LabelManagedBy] == cachev1alpha1.ManagedByValue && l[cachev1alpha1.LabelCluster] == cc.Name {
		return ""
	}
	return fmt.Sprintf("%s %s exists and was not created by cacheops for this cluster", kind, live.GetName())
}

// nameConflict is the Stalled reason for objects cc cannot own.
func nameConflict(conflicts []string) *stall {
	sort.Strings(conflicts)
	return &stall{reason: cachev1alpha1.ReasonNameConflict, message: "Nothing was applied: " + strings.Join(conflicts, "; ") +
		". cacheops never takes over an object it does not control: rename this CacheCluster, or delete or rename the other object"}
}
