package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// reconcileDelete removes the cluster's children and, unless
// spec.storage.retainOnDelete is set, its PersistentVolumeClaims, then lets
// the CacheCluster go. It deletes explicitly instead of leaving it to the
// garbage collector, so the outcome does not depend on which controllers the
// cluster runs, and it runs even when the cluster is paused: a person asked
// for the deletion. A cluster whose stored object does not decode keeps its
// PersistentVolumeClaims: its retainOnDelete cannot be read.
func (r *Reconciler) reconcileDelete(ctx context.Context, cc *cachev1alpha1.CacheCluster) error {
	if !controllerutil.ContainsFinalizer(cc, cachev1alpha1.Finalizer) {
		return nil
	}
	log := ctrl.LoggerFrom(ctx)

	children, err := r.listChildren(ctx, cc)
	if err != nil {
		return err
	}
	for _, child := range children {
		if err := r.Client.Delete(ctx, child, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %s %s: %w", child.GetObjectKind().GroupVersionKind().Kind, child.GetName(), err)
		}
		r.known.forget(child.GetUID())
	}

	pvcs := 0
	retain := cc.Spec.Storage.RetainOnDelete || cc.DecodeError != ""
	if !retain {
		// PVCs are created by the StatefulSet controller from the claim
		// template, which carries the cluster label; read them directly, we
		// do not cache PVCs.
		list := &corev1.PersistentVolumeClaimList{}
		if err := r.APIReader.List(ctx, list, client.InNamespace(cc.Namespace), client.MatchingLabels{
			cachev1alpha1.LabelCluster: cc.Name, "app.kubernetes.io/name": "cachecluster",
		}); err != nil {
			return fmt.Errorf("listing PVCs: %w", err)
		}
		for i := range list.Items {
			pvc := &list.Items[i]
			if !pvc.DeletionTimestamp.IsZero() {
				continue
			}
			if err := r.Client.Delete(ctx, pvc); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting PVC %s: %w", pvc.Name, err)
			}
			pvcs++
		}
	}

	switch {
	case cc.DecodeError != "":
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.ReasonDeleting, "Delete",
			"Deleted %d object(s); PersistentVolumeClaims kept because the stored spec does not decode (delete them by hand if the data is not needed)", len(children))
	case cc.Spec.Storage.RetainOnDelete:
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.ReasonDeleting, "Delete", "Deleted %d object(s); PersistentVolumeClaims kept (storage.retainOnDelete)", len(children))
	default:
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.ReasonDeleting, "Delete", "Deleted %d object(s) and %d PersistentVolumeClaim(s)", len(children), pvcs)
	}
	log.Info("Deleted cluster objects", "objects", len(children), "pvcs", pvcs, "retainPVCs", retain)

	patch := client.MergeFrom(cc.DeepCopy())
	controllerutil.RemoveFinalizer(cc, cachev1alpha1.Finalizer)
	if err := r.Client.Patch(ctx, cc, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	return nil
}
