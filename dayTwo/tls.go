package daytwo

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/access"
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/renderer"
	"github.com/cacheops/cacheops/renderer/certificates"
)

// clientTLS is the client side of TLS of one cluster, kept while its CA
// bundle does not change, so the prober keeps its connections (a new
// *tls.Config is a new access.Config to it).
type clientTLS struct {
	bundle []byte
	config *tls.Config
}

// certificateOf is what day-two needs of Secret <name>-tls: the client
// side of TLS (the CAs the pods trust, the Service's name) and the
// certificate the pods must serve. Missing or unreadable: the pods cannot
// start either, and the reconcile waits for day-one or cert-manager.
func (r *Reconciler) certificateOf(ctx context.Context, cc *cachev1alpha1.CacheCluster) (*tls.Config, *x509.Certificate, error) {
	sec := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: renderer.TLSSecretName(cc)}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, missingSecret(fmt.Sprintf("Secret %s does not exist", renderer.TLSSecretName(cc)))
		}
		return nil, nil, err
	}
	leaf, err := certificates.ParseCert(sec.Data[certificates.CertKey])
	if err != nil {
		return nil, nil, fmt.Errorf("Secret %s: %s: %w", sec.Name, certificates.CertKey, err)
	}
	bundle := sec.Data[certificates.CAKey]
	key := client.ObjectKeyFromObject(cc)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clientTLS[key]; ok && bytes.Equal(c.bundle, bundle) {
		return c.config, leaf, nil
	}
	cfg, err := access.ClientTLS(bundle, renderer.TLSServerName(cc))
	if err != nil {
		return nil, nil, fmt.Errorf("Secret %s: %s: %w", sec.Name, certificates.CAKey, err)
	}
	if r.clientTLS == nil {
		r.clientTLS = map[types.NamespacedName]clientTLS{}
	}
	r.clientTLS[key] = clientTLS{bundle: bytes.Clone(bundle), config: cfg}
	return cfg, leaf, nil
}

// tlsSnapshot is the planner's view of the certificate: the Secret's, and
// what each pod was last seen serving.
func (r *Reconciler) tlsSnapshot(key types.NamespacedName, leaf *x509.Certificate) *plan.TLSState {
	st := &plan.TLSState{Serial: certificates.SerialHex(leaf), NotAfter: leaf.NotAfter, Served: map[string]plan.ServedCert{}}
	r.mu.Lock()
	defer r.mu.Unlock()
	for pod, sc := range r.served[key] {
		st.Served[pod] = sc
	}
	return st
}

// reloadTLS looks at the certificate a.Pod serves on a new connection and,
// when it is not the Secret's, asks the server to read its certificate
// files again (CONFIG SET tls-cert-file with the same path: Redis and
// Valkey then load the certificate, key and CA files anew for new
// connections; open ones keep theirs) and looks again. What it saw is
// recorded for the planner. Serving the old certificate after the reload
// is no error: the kubelet has not updated the mounted files yet, and the
// planner asks again a little later.
func (r *Reconciler) reloadTLS(ctx context.Context, s *scope, a plan.Action) error {
	p, _ := s.snap.Pod(a.Pod)
	want := s.snap.TLS.Serial
	seen, err := servedCertificate(ctx, p.IP, s.access)
	if err != nil {
		return fmt.Errorf("looking at the certificate of %s: %w", a.Pod, err)
	}
	if seen.Serial != want {
		c := redisClient(p.IP, s.access)
		err := c.ConfigSet(ctx, "tls-cert-file", renderer.TLSMountPath+"/"+certificates.CertKey).Err()
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("CONFIG SET tls-cert-file on %s: %w", a.Pod, err)
		}
		before := seen.Serial
		if seen, err = servedCertificate(ctx, p.IP, s.access); err != nil {
			return fmt.Errorf("looking at the certificate of %s after the reload: %w", a.Pod, err)
		}
		log := ctrl.LoggerFrom(ctx)
		if seen.Serial == want {
			log.Info("The pod loaded the renewed certificate", "pod", a.Pod, "serial", want, "previous", before)
		} else {
			log.V(1).Info("The pod's certificate files are not updated yet", "pod", a.Pod, "serves", seen.Serial, "secret", want)
		}
	}
	seen.RunID, seen.CheckedAt = p.Obs.RunID, r.now()
	r.mu.Lock()
	if r.served == nil {
		r.served = map[types.NamespacedName]map[string]plan.ServedCert{}
	}
	if r.served[s.key] == nil {
		r.served[s.key] = map[string]plan.ServedCert{}
	}
	r.served[s.key][a.Pod] = seen
	r.mu.Unlock()
	servedExpiry.WithLabelValues(s.key.Namespace, s.key.Name, a.Pod).Set(float64(seen.NotAfter.Unix()))
	return nil
}

// servedCertificate is the certificate a pod's server presents on a new
// connection (checked against the cluster's CAs).
func servedCertificate(ctx context.Context, ip string, acc access.Config) (plan.ServedCert, error) {
	conn, err := acc.Dial(ctx, &net.Dialer{Timeout: 2 * time.Second}, net.JoinHostPort(ip, "6379"))
	if err != nil {
		return plan.ServedCert{}, err
	}
	defer conn.Close()
	tc, ok := conn.(*tls.Conn)
	if !ok || len(tc.ConnectionState().PeerCertificates) == 0 {
		return plan.ServedCert{}, fmt.Errorf("%s presented no certificate", ip)
	}
	leaf := tc.ConnectionState().PeerCertificates[0]
	return plan.ServedCert{Serial: certificates.SerialHex(leaf), NotAfter: leaf.NotAfter}, nil
}

// setCertificateLoaded keeps the CertificateLoaded condition: True once
// every reachable pod serves the Secret's certificate, with an Event each
// time a certificate other than the one recorded is loaded everywhere;
// removed without TLS.
func setCertificateLoaded(s *scope) {
	cur := meta.FindStatusCondition(s.cc.Status.Conditions, cachev1alpha1.ConditionCertificateLoaded)
	if s.snap.TLS == nil {
		if cur != nil && !renderer.TLSEnabled(s.cc) {
			s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
				meta.RemoveStatusCondition(&st.Conditions, cachev1alpha1.ConditionCertificateLoaded)
			})
		}
		return
	}
	ok, msg := plan.TLSLoadedMessage(s.snap)
	status, reason := metav1.ConditionFalse, cachev1alpha1.ReasonCertificateNotLoaded
	if ok {
		status, reason = metav1.ConditionTrue, cachev1alpha1.ReasonCertificateLoaded
	}
	if cur != nil && cur.Status == status && cur.Message == msg {
		return
	}
	gen := s.cc.Generation
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: cachev1alpha1.ConditionCertificateLoaded, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
		})
	})
	// Loaded after a renewal: from False (a pod served the old one when
	// looked at) or straight from True with the old serial (every pod
	// reloaded before day-two saw one serve the old certificate).
	if ok && cur != nil {
		s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventCertificateLoaded, "ReloadTLS", "%s", msg)
	}
}
