package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// reconcileUndecodable handles a CacheCluster whose stored object does not
// decode (written under an older CRD or by hand): its spec is unknown, so
// nothing is rendered, applied or pruned. The object is reported, by an
// Event and, where the API server lets the status be written, Stalled with
// the decoder's words; its deletion still completes (reconcileDelete, which
// keeps its PersistentVolumeClaims). The other clusters are
// not affected: the informer keeps serving them (api/v1alpha1/decode.go).
func (r *Reconciler) reconcileUndecodable(ctx context.Context, cc *cachev1alpha1.CacheCluster) error {
	log := ctrl.LoggerFrom(ctx)
	if !cc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, cc)
	}
	msg := "The operator cannot read this CacheCluster: " + cc.DecodeError
	log.Info("Cluster does not decode; not reconciling it", "error", cc.DecodeError)
	r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonDecodeFailed, "Reconcile", "%s", msg)
	original := cc.DeepCopy()
	cc.Status.Phase = cachev1alpha1.PhaseFailed
	gen := cc.Generation
	setCondition(cc, cachev1alpha1.ConditionStalled, metav1.ConditionTrue, cachev1alpha1.ReasonDecodeFailed, msg, gen)
	setCondition(cc, cachev1alpha1.ConditionReady, metav1.ConditionFalse, cachev1alpha1.ReasonDecodeFailed, msg, gen)
	// A merge patch of phase and conditions only: the rest of the status is
	// unknown and must not be overwritten with zero values.
	if err := r.Client.Status().Patch(ctx, cc, client.MergeFrom(original)); err != nil {
		// The API server may refuse any write to an object that does not
		// match the schema; the Event and the log still say what is wrong.
		log.Info("Cannot write the status of an undecodable cluster", "error", err.Error())
	}
	return nil
}
