package controller

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
	"github.com/cacheops/cacheops/renderer/certificates"
)

func getSecret(g Gomega, ns, name string) *corev1.Secret {
	s := &corev1.Secret{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	return s
}

// A cluster with spec.tls and no issuer: the operator makes its CA and
// server certificate before the pods need them, names every Service and
// pod in it, keeps the clients' bundle, records status.tls, and renews the
// certificate when it has renewBefore left. The CA's key lost: a new CA,
// a new certificate from it.
func TestTLSCertificatesFromTheOperatorsCA(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cc := loadExample(t, "tls", ns)
	// Renewed 10 s after it is issued.
	cc.Spec.TLS.Duration, cc.Spec.TLS.RenewBefore = "1m", "50s"
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())

	var leaf *x509.Certificate
	g.Eventually(func(g Gomega) {
		srv := getSecret(g, ns, "secure-tls")
		caSec := getSecret(g, ns, "secure-tls-ca")
		g.Expect(metav1.IsControlledBy(srv, cc) || srv.OwnerReferences[0].Name == "secure").To(BeTrue())
		var key any
		var err error
		leaf, key, err = certificates.ParsePair(certificates.Pair{Cert: srv.Data["tls.crt"], Key: srv.Data["tls.key"]})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(key).NotTo(BeNil())
		ca, _, err := certificates.ParsePair(certificates.Pair{Cert: caSec.Data["ca.crt"], Key: caSec.Data["ca.key"]})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(leaf.CheckSignatureFrom(ca)).To(Succeed())
		g.Expect(string(srv.Data["ca.crt"])).To(Equal(string(caSec.Data["ca.crt"])))
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "secure-ca"}, cm)).To(Succeed())
		g.Expect(cm.Data["ca.crt"]).To(Equal(string(srv.Data["ca.crt"])), "clients trust what the pods trust")
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(leaf.DNSNames).To(ContainElements("secure", "secure."+ns+".svc", "secure-read."+ns+".svc.cluster.local", "*.secure-headless."+ns+".svc"))
	g.Expect(leaf.VerifyHostname("secure-1.secure-headless." + ns + ".svc")).To(Succeed())
	g.Expect(leaf.NotAfter.Sub(time.Now())).To(BeNumerically("~", time.Minute, 5*time.Second))
	first := certificates.SerialHex(leaf)

	// The chart's declared Secrets are the same objects: applied, kept.
	sts := &unstructured.Unstructured{}
	sts.SetAPIVersion("apps/v1")
	sts.SetKind("StatefulSet")
	g.Eventually(func() error { return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "secure"}, sts) }, 30*time.Second).Should(Succeed())
	var got cachev1alpha1.CacheCluster
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cc), &got)).To(Succeed())
		g.Expect(got.Status.TLS).NotTo(BeNil())
		g.Expect(got.Status.TLS.Serial).To(Equal(first))
		g.Expect(got.Status.TLS.NotAfter.Time).To(BeTemporally("==", leaf.NotAfter.Truncate(time.Second)))
		g.Expect(got.Status.TLS.RenewalTime.Time).To(BeTemporally("==", leaf.NotAfter.Add(-50*time.Second).Truncate(time.Second)))
		g.Expect(got.Status.TLS.CANotAfter).NotTo(BeNil())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	// Renewed on time, by the same CA, without anything else changing.
	caBefore := getSecret(g, ns, "secure-tls-ca").Data["ca.crt"]
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cc), &got)).To(Succeed())
		g.Expect(got.Status.TLS.Serial).NotTo(Equal(first))
	}, 40*time.Second, 200*time.Millisecond).Should(Succeed(), "renewed when 50s of 1m are left")
	renewed, err := certificates.ParseCert(getSecret(g, ns, "secure-tls").Data["tls.crt"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(certificates.SerialHex(renewed)).To(Equal(got.Status.TLS.Serial))
	g.Expect(getSecret(g, ns, "secure-tls-ca").Data["ca.crt"]).To(Equal(caBefore), "a renewal keeps the CA")

	// The CA's key is lost: a new CA; the certificate is issued from it.
	caSec := getSecret(g, ns, "secure-tls-ca")
	patch := client.MergeFrom(caSec.DeepCopy())
	delete(caSec.Data, "ca.key")
	g.Expect(k8s.Patch(ctx, caSec, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		caSec := getSecret(g, ns, "secure-tls-ca")
		g.Expect(caSec.Data["ca.key"]).NotTo(BeEmpty())
		g.Expect(caSec.Data["ca.crt"]).NotTo(Equal(caBefore))
		g.Expect(caSec.Data["previous-ca.crt"]).To(Equal(caBefore), "the old CA stays trusted until it ends")
		srv := getSecret(g, ns, "secure-tls")
		leaf, err := certificates.ParseCert(srv.Data["tls.crt"])
		g.Expect(err).NotTo(HaveOccurred())
		ca, err := certificates.ParseCert(caSec.Data["ca.crt"])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(leaf.CheckSignatureFrom(ca)).To(Succeed())
		bundle, err := certificates.ParseCerts(srv.Data["ca.crt"])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(bundle).To(HaveLen(2))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(eventReasons(g, ns)).To(ContainElements(cachev1alpha1.EventCAIssued, cachev1alpha1.EventCertificateIssued))
}

// eventReasons lists the reasons of a namespace's Events.
func eventReasons(g Gomega, ns string) []string {
	list := &corev1.EventList{}
	g.Expect(k8s.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason)
	}
	return out
}

// With spec.tls.issuerRef the chart renders a cert-manager Certificate,
// which cert-manager's own CRD (installed in this suite) admits. cert-
// manager does not run here (its controller cannot be built from the
// module proxy): the test writes what cert-manager would — a
// CertificateRequest that reports a missing issuer, then the Secret — and
// checks what the operator makes of it.
func TestTLSWithACertManagerIssuer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cc := loadExample(t, "tls-cert-manager", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(CertificateGVK)
	g.Eventually(func() error { return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "issued"}, cert) }, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(metav1.IsControlledBy(cert, cc) || cert.GetOwnerReferences()[0].Name == "issued").To(BeTrue())
	names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	g.Expect(names).To(Equal(renderer.TLSDNSNames(cc)))
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	g.Expect(secretName).To(Equal("issued-tls"))

	// cert-manager cannot find the issuer: it says so on the request.
	req := &unstructured.Unstructured{}
	req.SetGroupVersionKind(CertificateRequestGVK)
	req.SetNamespace(ns)
	req.SetName("issued-1")
	req.SetAnnotations(map[string]string{"cert-manager.io/certificate-name": "issued"})
	g.Expect(unstructured.SetNestedField(req.Object, map[string]any{"name": "internal-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}, "spec", "issuerRef")).To(Succeed())
	g.Expect(unstructured.SetNestedField(req.Object, "LS0tLS1CRUdJTg==", "spec", "request")).To(Succeed())
	g.Expect(k8s.Create(ctx, req)).To(Succeed())
	g.Expect(unstructured.SetNestedSlice(req.Object, []any{map[string]any{
		"type": "Ready", "status": "False", "reason": "Pending", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		"message": `Referenced "ClusterIssuer" not found: clusterissuer.cert-manager.io "internal-ca" not found`,
	}}, "status", "conditions")).To(Succeed())
	g.Expect(k8s.Status().Update(ctx, req)).To(Succeed())

	// Past the grace time, the cluster is Stalled with those words.
	defer func(old time.Duration) { IssuanceGrace = old }(IssuanceGrace)
	IssuanceGrace = time.Second
	touch(g, cc)
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cc), got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionStalled)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonCertificateUnavailable))
		g.Expect(c.Message).To(ContainSubstring(`clusterissuer.cert-manager.io "internal-ca" not found`))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

	// cert-manager issues: the Secret with our labels (its
	// secretTemplate), not controlled by the cluster.
	now := time.Now()
	ca, err := certificates.NewCA(now, "issuer", 24*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	leaf, err := certificates.Issue(now, ca, "issued."+ns+".svc", renderer.TLSDNSNames(cc), 2160*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issued-tls", Labels: map[string]string{cachev1alpha1.LabelCluster: "issued", cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue}},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": leaf.Cert, "tls.key": leaf.Key, "ca.crt": ca.Cert},
	})).To(Succeed())
	parsed, err := certificates.ParseCert(leaf.Cert)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cc), got)).To(Succeed())
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionStalled)).To(BeNil())
		g.Expect(got.Status.TLS).NotTo(BeNil())
		g.Expect(got.Status.TLS.Serial).To(Equal(certificates.SerialHex(parsed)))
		g.Expect(got.Status.TLS.CANotAfter).To(BeNil(), "the operator keeps no CA with an issuer")
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "issued-ca"}, cm)).To(Succeed())
		g.Expect(cm.Data["ca.crt"]).To(Equal(string(ca.Cert)))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	// The operator never made a CA Secret for it.
	err = k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "issued-tls-ca"}, &corev1.Secret{})
	g.Expect(client.IgnoreNotFound(err)).To(Succeed())
	g.Expect(err).To(HaveOccurred())
}

// touch changes an annotation, so the cluster is reconciled now.
func touch(g Gomega, cc *cachev1alpha1.CacheCluster) {
	live := &cachev1alpha1.CacheCluster{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), live)).To(Succeed())
	patch := client.MergeFrom(live.DeepCopy())
	if live.Annotations == nil {
		live.Annotations = map[string]string{}
	}
	live.Annotations["test/touch"] = time.Now().String()
	g.Expect(k8s.Patch(context.Background(), live, patch)).To(Succeed())
}

// An issuerRef on a Kubernetes cluster without cert-manager: Stalled, with
// what to install.
func TestTLSIssuerWithoutCertManagerStalls(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	cc := loadExample(t, "tls-cert-manager", ns)
	r := &Reconciler{Client: k8s, APIReader: k8s, Recorder: events.NewFakeRecorder(10), Capabilities: StaticCapabilities(renderer.DefaultCapabilities())}
	s := &scope{cc: cc, now: time.Now()}
	err := r.ensureTLS(context.Background(), s)
	var st *stall
	g.Expect(err).To(BeAssignableToTypeOf(st))
	g.Expect(err.Error()).To(ContainSubstring("does not serve cert-manager's Certificates (cert-manager.io/v1): install cert-manager"))
}
