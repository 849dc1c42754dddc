package controller

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
	"github.com/cacheops/cacheops/renderer/certificates"
)

// TLSFieldManager owns the certificates, keys and bundles the operator
// writes into the TLS Secrets and the CA bundle ConfigMap the chart
// declares.
const TLSFieldManager = "cacheops-tls"

// DefaultCADuration is the lifetime of the CA the operator keeps for a
// cluster without an issuer (--tls-ca-duration).
const DefaultCADuration = 10 * 365 * 24 * time.Hour

// tlsRecheck is when a cluster whose certificate cannot be had yet (cert-
// manager issuing) is looked at again.
const tlsRecheck = 10 * time.Second

// ensureTLS makes sure a cluster with spec.tls has its certificate before
// any pod needs it, and renews it in time. Without an issuer the operator
// keeps the cluster's CA and issues the server certificate (issueTLS);
// with one, cert-manager does, and this reads what it wrote (readIssued).
// Either way status.tls and the clients' CA bundle follow the Secret.
func (r *Reconciler) ensureTLS(ctx context.Context, s *scope) error {
	cc := s.cc
	if !renderer.TLSEnabled(cc) {
		cc.Status.TLS = nil
		return nil
	}
	if cc.Spec.TLS.IssuerRef != nil {
		return r.readIssued(ctx, s)
	}
	return r.issueTLS(ctx, s)
}

// issueTLS decides on the Secrets' content (certificates.Decide) and
// writes a new CA and server certificate when they are due. A decision to
// make something is taken again on a live read, so a lagging cache never
// makes two CAs.
func (r *Reconciler) issueTLS(ctx context.Context, s *scope) error {
	cc := s.cc
	duration, renewBefore, err := renderer.TLSDurations(cc)
	if err != nil {
		return &stall{reason: cachev1alpha1.ReasonInvalidSpec, message: err.Error()}
	}
	policy := certificates.Policy{DNSNames: renderer.TLSDNSNames(cc), Duration: duration, RenewBefore: renewBefore, CADuration: r.caDuration()}
	caKey := client.ObjectKey{Namespace: cc.Namespace, Name: renderer.TLSCASecretName(cc)}
	srvKey := client.ObjectKey{Namespace: cc.Namespace, Name: renderer.TLSSecretName(cc)}

	caSecret, srvSecret, err := r.readTLSSecrets(ctx, r.Client, cc, caKey, srvKey)
	if err != nil {
		return err
	}
	d := certificates.Decide(s.now, certificates.ReadState(caSecret.Data, srvSecret.Data), policy)
	if d.NewCA || d.DropPrevious || d.Issue {
		// Decide again on what the API server holds now.
		if caSecret, srvSecret, err = r.readTLSSecrets(ctx, r.APIReader, cc, caKey, srvKey); err != nil {
			return err
		}
		d = certificates.Decide(s.now, certificates.ReadState(caSecret.Data, srvSecret.Data), policy)
	}
	if d.NewCA || d.DropPrevious {
		data, err := r.rotateCA(s, caSecret.Data, d, policy)
		if err != nil {
			return err
		}
		if err := r.writeSecret(ctx, cc, caSecret, data); err != nil {
			return err
		}
	}
	if d.Issue {
		data, leaf, err := issueServer(s.now, caSecret.Data, d, policy, renderer.TLSServerName(cc))
		if err != nil {
			return err
		}
		if err := r.writeSecret(ctx, cc, srvSecret, data); err != nil {
			return err
		}
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventCertificateIssued, "IssueCertificate",
			"Issued the server certificate %s into Secret %s, valid until %s: %s", certificates.SerialHex(leaf), srvKey.Name, stamp(leaf.NotAfter), d.Reason)
		ctrl.LoggerFrom(ctx).Info("Issued the server certificate", "serial", certificates.SerialHex(leaf), "notAfter", leaf.NotAfter, "reason", d.Reason)
	}
	if err := r.writeBundle(ctx, cc, srvSecret.Data[certificates.CAKey]); err != nil {
		return err
	}
	st := certificates.ReadState(caSecret.Data, srvSecret.Data)
	if st.Leaf == nil || st.Current == nil {
		return errors.New("the TLS Secrets hold no certificate after issuing one")
	}
	setTLSStatus(cc, st.Leaf, renewBefore, st.Current.Cert)
	if wait := d.Next.Sub(s.now); !d.Next.IsZero() && (s.requeue == 0 || wait < s.requeue) {
		s.requeue = max(wait, time.Second)
	}
	return nil
}

// caDuration is --tls-ca-duration, DefaultCADuration when unset.
func (r *Reconciler) caDuration() time.Duration {
	if r.TLSCADuration > 0 {
		return r.TLSCADuration
	}
	return DefaultCADuration
}

// readTLSSecrets reads the CA Secret and the server Secret with rd; a
// missing one is returned empty (with its name and namespace), one that
// another owner controls stalls the cluster.
func (r *Reconciler) readTLSSecrets(ctx context.Context, rd client.Reader, cc *cachev1alpha1.CacheCluster, keys ...client.ObjectKey) (*corev1.Secret, *corev1.Secret, error) {
	out := make([]*corev1.Secret, len(keys))
	var conflicts []string
	for i, key := range keys {
		sec := &corev1.Secret{}
		err := rd.Get(ctx, key, sec)
		switch {
		case apierrors.IsNotFound(err):
			sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		case err != nil:
			return nil, nil, fmt.Errorf("reading Secret %s: %w", key.Name, err)
		default:
			// Never read or write a key in a Secret someone else controls.
			if c := controlConflict(cc, "Secret", sec); c != "" {
				conflicts = append(conflicts, c)
			}
		}
		out[i] = sec
	}
	if len(conflicts) > 0 {
		return nil, nil, nameConflict(conflicts)
	}
	return out[0], out[1], nil
}

// rotateCA is the CA Secret's data after d: a new CA first (the current
// one becomes the previous), the previous one dropped once it ended.
func (r *Reconciler) rotateCA(s *scope, data map[string][]byte, d certificates.Decision, p certificates.Policy) (map[string][]byte, error) {
	cc := s.cc
	out := map[string][]byte{}
	for k, v := range data {
		out[k] = v
	}
	if d.DropPrevious {
		delete(out, certificates.PreviousCACertKey)
		delete(out, certificates.PreviousCAKey)
	}
	if !d.NewCA {
		return out, nil
	}
	ca, err := certificates.NewCA(s.now, fmt.Sprintf("cacheops CA of %s/%s", cc.Namespace, cc.Name), p.CALifetime())
	if err != nil {
		return nil, fmt.Errorf("making a CA: %w", err)
	}
	if len(data[certificates.CACertKey]) > 0 {
		out[certificates.PreviousCACertKey], out[certificates.PreviousCAKey] = data[certificates.CACertKey], data[certificates.CAPrivateKey]
	}
	out[certificates.CACertKey], out[certificates.CAPrivateKey] = ca.Cert, ca.Key
	cert, _ := certificates.ParseCert(ca.Cert)
	r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, cachev1alpha1.EventCAIssued, "IssueCA",
		"Made a new CA for the cluster, valid until %s: %s", stamp(cert.NotAfter), d.CAReason)
	return out, nil
}

// issueServer is the server Secret's data with a certificate signed by the
// CA d chose from caData (already rotated), and that certificate.
func issueServer(now time.Time, caData map[string][]byte, d certificates.Decision, p certificates.Policy, commonName string) (map[string][]byte, *x509.Certificate, error) {
	signer := certificates.Pair{Cert: caData[certificates.CACertKey], Key: caData[certificates.CAPrivateKey]}
	if d.SignWith == certificates.SignPrevious {
		signer = certificates.Pair{Cert: caData[certificates.PreviousCACertKey], Key: caData[certificates.PreviousCAKey]}
	}
	leaf, err := certificates.Issue(now, signer, commonName, p.DNSNames, p.Duration)
	if err != nil {
		return nil, nil, fmt.Errorf("issuing the server certificate: %w", err)
	}
	st := certificates.ReadState(caData, nil)
	trusted := []*x509.Certificate{st.Current.Cert}
	if st.Previous != nil && now.Before(st.Previous.Cert.NotAfter) {
		trusted = append(trusted, st.Previous.Cert)
	}
	cert, _ := certificates.ParseCert(leaf.Cert)
	return map[string][]byte{
		certificates.CertKey: leaf.Cert,
		certificates.KeyKey:  leaf.Key,
		certificates.CAKey:   certificates.Bundle(trusted),
	}, cert, nil
}

// writeSecret stores data in sec: a create for a Secret that does not
// exist yet (the chart declares it; the apply step then adds nothing but
// metadata), else a patch guarded by the resourceVersion read. sec is
// updated to what was written.
func (r *Reconciler) writeSecret(ctx context.Context, cc *cachev1alpha1.CacheCluster, sec *corev1.Secret, data map[string][]byte) error {
	if sec.ResourceVersion == "" {
		sec.Labels = map[string]string{
			cachev1alpha1.LabelCluster:   cc.Name,
			cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue,
		}
		sec.Type = corev1.SecretTypeOpaque
		sec.Data = data
		if err := ctrl.SetControllerReference(cc, sec, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, sec, client.FieldOwner(TLSFieldManager)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("Secret %s appeared while creating it; retrying", sec.Name)
			}
			return fmt.Errorf("creating Secret %s: %w", sec.Name, err)
		}
		return nil
	}
	patch := client.MergeFromWithOptions(sec.DeepCopy(), client.MergeFromWithOptimisticLock{})
	// The patch removes the keys data lacks (a dropped previous CA).
	sec.Data = data
	if err := r.Client.Patch(ctx, sec, patch, client.FieldOwner(TLSFieldManager)); err != nil {
		return fmt.Errorf("writing Secret %s: %w", sec.Name, err)
	}
	return nil
}

// writeBundle keeps the clients' CA bundle (ConfigMap <name>-ca, key
// ca.crt) equal to the CAs the pods trust.
func (r *Reconciler) writeBundle(ctx context.Context, cc *cachev1alpha1.CacheCluster, bundle []byte) error {
	key := client.ObjectKey{Namespace: cc.Namespace, Name: renderer.CABundleName(cc)}
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, key, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{
				cachev1alpha1.LabelCluster:   cc.Name,
				cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue,
			}},
			Data: map[string]string{certificates.CAKey: string(bundle)},
		}
		if err := ctrl.SetControllerReference(cc, cm, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, cm, client.FieldOwner(TLSFieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ConfigMap %s: %w", key.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading ConfigMap %s: %w", key.Name, err)
	}
	if c := controlConflict(cc, "ConfigMap", cm); c != "" {
		return nameConflict([]string{c})
	}
	if bytes.Equal([]byte(cm.Data[certificates.CAKey]), bundle) {
		return nil
	}
	patch := client.MergeFrom(cm.DeepCopy())
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[certificates.CAKey] = string(bundle)
	if err := r.Client.Patch(ctx, cm, patch, client.FieldOwner(TLSFieldManager)); err != nil {
		return fmt.Errorf("writing ConfigMap %s: %w", key.Name, err)
	}
	return nil
}

// setTLSStatus records the server certificate (and the operator's CA,
// when there is one) in status.tls.
func setTLSStatus(cc *cachev1alpha1.CacheCluster, leaf *x509.Certificate, renewBefore time.Duration, ca *x509.Certificate) {
	st := &cachev1alpha1.TLSStatus{
		NotAfter:    &metav1.Time{Time: leaf.NotAfter.UTC()},
		RenewalTime: &metav1.Time{Time: leaf.NotAfter.Add(-renewBefore).UTC()},
		Serial:      certificates.SerialHex(leaf),
	}
	if ca != nil {
		st.CANotAfter = &metav1.Time{Time: ca.NotAfter.UTC()}
	}
	cc.Status.TLS = st
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
