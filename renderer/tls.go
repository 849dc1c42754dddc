package renderer

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// Defaults of spec.tls that the CRD applies at admission.
const (
	DefaultTLSDuration    = cachev1alpha1.Duration("90d")
	DefaultTLSRenewBefore = cachev1alpha1.Duration("7d")
	// TLSMountPath is where a pod mounts Secret <name>-tls: tls.crt,
	// tls.key and ca.crt (the CAs the pods trust).
	TLSMountPath = "/etc/redis-tls"
)

// ClusterDomain is the DNS domain of the Kubernetes cluster, for the
// names the server certificate carries. The manager sets it from
// --cluster-domain.
var ClusterDomain = "cluster.local"

// TLSEnabled says whether a cluster serves TLS only.
func TLSEnabled(cc *cachev1alpha1.CacheCluster) bool {
	return cc.Spec.TLS.Enabled
}

// TLSSecretName is the Secret that holds the server certificate, its key
// and the CA bundle: the pods mount it, cert-manager or the operator
// writes it.
func TLSSecretName(cc *cachev1alpha1.CacheCluster) string {
	return cc.Name + "-tls"
}

// TLSCASecretName is the Secret of the CA the operator keeps for a
// cluster without an issuer: its certificate and key, and the previous
// CA's while it is trusted. Nothing mounts it.
func TLSCASecretName(cc *cachev1alpha1.CacheCluster) string {
	return cc.Name + "-tls-ca"
}

// CABundleName is the ConfigMap clients read the CA bundle from (key
// ca.crt): the CAs a cluster's certificate may be signed by.
func CABundleName(cc *cachev1alpha1.CacheCluster) string {
	return cc.Name + "-ca"
}

// TLSServerName is the name the operator checks in the server
// certificate when it connects to a pod by address: the Service's.
func TLSServerName(cc *cachev1alpha1.CacheCluster) string {
	return cc.Name + "." + namespaceOf(cc) + ".svc"
}

// TLSDNSNames are the names the server certificate carries: the client
// Services (<name>, <name>-read) in every form a client in the cluster
// may use, and every pod under the headless Service. No address: pods are
// reached by address only by the operator (which checks TLSServerName),
// by replicas and a sharded cluster's peers (Redis checks the CA, not
// the name), and by cluster-aware clients that follow a redirect to an
// address (they set the server name to the Service's).
func TLSDNSNames(cc *cachev1alpha1.CacheCluster) []string {
	ns := namespaceOf(cc)
	var names []string
	for _, svc := range []string{cc.Name, cc.Name + "-read"} {
		names = append(names, svc, svc+"."+ns, svc+"."+ns+".svc", svc+"."+ns+".svc."+ClusterDomain)
	}
	headless := cc.Name + "-headless." + ns + ".svc"
	return append(names, headless, "*."+headless, headless+"."+ClusterDomain, "*."+headless+"."+ClusterDomain)
}

// TLSDurations are spec.tls's certificate lifetime and renewal margin,
// defaulted as the CRD does.
func TLSDurations(cc *cachev1alpha1.CacheCluster) (duration, renewBefore time.Duration, err error) {
	d, rb := cc.Spec.TLS.Duration, cc.Spec.TLS.RenewBefore
	if d == "" {
		d = DefaultTLSDuration
	}
	if rb == "" {
		rb = DefaultTLSRenewBefore
	}
	if duration, err = d.Parse(); err != nil {
		return 0, 0, fmt.Errorf("spec.tls.duration: %w", err)
	}
	if renewBefore, err = rb.Parse(); err != nil {
		return 0, 0, fmt.Errorf("spec.tls.renewBefore: %w", err)
	}
	if renewBefore >= duration {
		return 0, 0, fmt.Errorf("spec.tls.renewBefore %s must be shorter than spec.tls.duration %s", rb, d)
	}
	return duration, renewBefore, nil
}

// tlsValues: the Secret the pods mount and, with an issuer, the
// cert-manager Certificate that fills it.
func tlsValues(cc *cachev1alpha1.CacheCluster) (map[string]any, error) {
	if !TLSEnabled(cc) {
		return map[string]any{"enabled": false}, nil
	}
	duration, renewBefore, err := TLSDurations(cc)
	if err != nil {
		return nil, err
	}
	names := make([]any, 0, 10)
	for _, n := range TLSDNSNames(cc) {
		names = append(names, n)
	}
	values := map[string]any{
		"enabled":      true,
		"secretName":   TLSSecretName(cc),
		"caSecretName": TLSCASecretName(cc),
		"bundleName":   CABundleName(cc),
		"mountPath":    TLSMountPath,
		"certManager":  false,
	}
	if ref := cc.Spec.TLS.IssuerRef; ref != nil {
		kind, group := ref.Kind, ref.Group
		if kind == "" {
			kind = "Issuer"
		}
		if group == "" {
			group = "cert-manager.io"
		}
		values["certManager"] = true
		values["issuerRef"] = map[string]any{"name": ref.Name, "kind": kind, "group": group}
		values["dnsNames"] = names
		values["commonName"] = TLSServerName(cc)
		values["duration"] = duration.String()
		values["renewBefore"] = renewBefore.String()
	}
	return values, nil
}

func namespaceOf(cc *cachev1alpha1.CacheCluster) string {
	if cc.Namespace == "" {
		return corev1.NamespaceDefault
	}
	return cc.Namespace
}
