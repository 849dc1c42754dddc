package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
	"github.com/cacheops/cacheops/renderer/certificates"
)

// CertificateGVK is cert-manager's Certificate, which the chart renders
// for a cluster with spec.tls.issuerRef; CertificateRequestGVK is the
// request cert-manager makes for it, whose condition says why an issuer
// does not sign.
var (
	CertificateGVK        = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}
	CertificateRequestGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "CertificateRequest"}
)

// IssuanceGrace is how long cert-manager may take to issue a cluster's
// first certificate before the cluster is Stalled with what cert-manager
// reports.
var IssuanceGrace = 2 * time.Minute

// readIssued follows the certificate cert-manager issues for a cluster
// with spec.tls.issuerRef: status.tls and the clients' CA bundle from
// Secret <name>-tls once it holds one. Without cert-manager the cluster is
// Stalled; while the Secret is missing the reconcile goes on (the apply
// step creates the Certificate), and once the Certificate has waited
// longer than IssuanceGrace the cluster is Stalled with cert-manager's own
// words.
func (r *Reconciler) readIssued(ctx context.Context, s *scope) error {
	cc := s.cc
	caps, err := r.Capabilities.Get(ctx)
	if err != nil {
		return fmt.Errorf("reading cluster capabilities: %w", err)
	}
	gv := CertificateGVK.GroupVersion().String()
	if !slices.Contains(caps.APIVersions, gv+"/"+CertificateGVK.Kind) && !slices.Contains(caps.APIVersions, gv) {
		ref := cc.Spec.TLS.IssuerRef
		return &stall{reason: cachev1alpha1.ReasonCertificateUnavailable, message: fmt.Sprintf(
			"spec.tls.issuerRef names %s %s, and this Kubernetes cluster does not serve cert-manager's Certificates (%s): install cert-manager, then the operator renders the cluster's Certificate", ref.Kind, ref.Name, gv)}
	}
	_, renewBefore, err := renderer.TLSDurations(cc)
	if err != nil {
		return &stall{reason: cachev1alpha1.ReasonInvalidSpec, message: err.Error()}
	}
	sec := &corev1.Secret{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: renderer.TLSSecretName(cc)}, sec)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading Secret %s: %w", renderer.TLSSecretName(cc), err)
	}
	if err == nil {
		leaf, _, perr := certificates.ParsePair(certificates.Pair{Cert: sec.Data[certificates.CertKey], Key: sec.Data[certificates.KeyKey]})
		if perr == nil {
			if err := r.writeBundle(ctx, cc, sec.Data[certificates.CAKey]); err != nil {
				return err
			}
			setTLSStatus(cc, leaf, renewBefore, nil)
			return nil
		}
		if leaf != nil {
			// cert-manager writes certificate and key together; a
			// mismatch is someone else's edit.
			return &stall{reason: cachev1alpha1.ReasonTLSSecretInvalid, message: fmt.Sprintf(
				"Secret %s holds no usable certificate and key (%v): delete it and cert-manager issues a new one", sec.Name, perr)}
		}
	}
	// No certificate yet: cert-manager is issuing, or cannot.
	why, created, err := r.issuanceState(ctx, cc)
	if err != nil {
		return err
	}
	if age := s.now.Sub(created); why != "" && age > IssuanceGrace {
		return &stall{reason: cachev1alpha1.ReasonCertificateUnavailable, message: fmt.Sprintf(
			"cert-manager has not issued the certificate of Certificate %s into Secret %s after %s: %s", cc.Name, renderer.TLSSecretName(cc), age.Round(time.Second), why)}
	}
	if s.requeue == 0 || tlsRecheck < s.requeue {
		s.requeue = tlsRecheck
	}
	return nil
}

// issuanceState says why cert-manager has not issued a cluster's
// certificate, from the Certificate's Ready condition and its newest
// CertificateRequest's, and when the Certificate was created; empty when
// the Certificate does not exist yet.
func (r *Reconciler) issuanceState(ctx context.Context, cc *cachev1alpha1.CacheCluster) (string, time.Time, error) {
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(CertificateGVK)
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: cc.Name}, cert)
	switch {
	case apierrors.IsNotFound(err):
		return "", time.Time{}, nil
	case err != nil:
		return "", time.Time{}, fmt.Errorf("reading Certificate %s: %w", cc.Name, err)
	}
	why := readyMessage(cert)
	reqs := &unstructured.UnstructuredList{}
	reqs.SetGroupVersionKind(CertificateRequestGVK.GroupVersion().WithKind(CertificateRequestGVK.Kind + "List"))
	if err := r.APIReader.List(ctx, reqs, client.InNamespace(cc.Namespace)); err != nil {
		return "", time.Time{}, fmt.Errorf("listing CertificateRequests: %w", err)
	}
	var newest *unstructured.Unstructured
	for i := range reqs.Items {
		req := &reqs.Items[i]
		if req.GetAnnotations()["cert-manager.io/certificate-name"] != cc.Name {
			continue
		}
		if newest == nil || newest.GetCreationTimestamp().Time.Before(req.GetCreationTimestamp().Time) {
			newest = req
		}
	}
	if newest != nil {
		if m := readyMessage(newest); m != "" {
			why = fmt.Sprintf("%s; CertificateRequest %s: %s", why, newest.GetName(), m)
		}
	}
	if why == "" {
		why = "it reports no condition yet (is cert-manager running?)"
	}
	return why, cert.GetCreationTimestamp().Time, nil
}

// readyMessage is the reason and message of a cert-manager object's
// Ready condition when it is not True.
func readyMessage(obj *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" || m["status"] == "True" {
			continue
		}
		return fmt.Sprintf("%v: %v", m["reason"], m["message"])
	}
	return ""
}
