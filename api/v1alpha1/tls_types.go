package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// TLSSpec serves every connection of a cluster over TLS: clients,
// replication, a sharded cluster's bus, and the operator's own (probes,
// day-two commands, backup streams). Plaintext connections are refused.
// Clients verify the server against the CA bundle in ConfigMap <name>-ca
// and authenticate with the password as before (docs/security.md).
//
// +kubebuilder:validation:XValidation:rule="!has(self.issuerRef) || (has(self.enabled) && self.enabled)",message="spec.tls.issuerRef applies only with spec.tls.enabled: true"
// +kubebuilder:validation:XValidation:rule="!has(self.renewBefore) || !has(self.duration) || (self.renewBefore.matches('[0-9]d') ? int(self.renewBefore.find('[0-9]+d').split('d')[0]) * 86400 : 0) + (self.renewBefore.matches('[0-9]h') ? int(self.renewBefore.find('[0-9]+h').split('h')[0]) * 3600 : 0) + (self.renewBefore.matches('[0-9]m') ? int(self.renewBefore.find('[0-9]+m').split('m')[0]) * 60 : 0) + (self.renewBefore.matches('[0-9]s') ? int(self.renewBefore.find('[0-9]+s').split('s')[0]) : 0) < (self.duration.matches('[0-9]d') ? int(self.duration.find('[0-9]+d').split('d')[0]) * 86400 : 0) + (self.duration.matches('[0-9]h') ? int(self.duration.find('[0-9]+h').split('h')[0]) * 3600 : 0) + (self.duration.matches('[0-9]m') ? int(self.duration.find('[0-9]+m').split('m')[0]) * 60 : 0) + (self.duration.matches('[0-9]s') ? int(self.duration.find('[0-9]+s').split('s')[0]) : 0)",messageExpression="'spec.tls.renewBefore ' + self.renewBefore + ' must be shorter than spec.tls.duration ' + self.duration + ': a certificate is renewed once it has renewBefore left, so it would be renewed again and again'"
// +kubebuilder:validation:XValidation:rule="!has(self.issuerRef) || !has(self.duration) || (self.duration.matches('[0-9]d') ? int(self.duration.find('[0-9]+d').split('d')[0]) * 86400 : 0) + (self.duration.matches('[0-9]h') ? int(self.duration.find('[0-9]+h').split('h')[0]) * 3600 : 0) + (self.duration.matches('[0-9]m') ? int(self.duration.find('[0-9]+m').split('m')[0]) * 60 : 0) + (self.duration.matches('[0-9]s') ? int(self.duration.find('[0-9]+s').split('s')[0]) : 0) >= 3600",messageExpression="'spec.tls.duration ' + self.duration + ' is shorter than cert-manager allows (1h); shorter lifetimes need the CA the operator keeps (leave issuerRef unset)'"
// +kubebuilder:validation:XValidation:rule="!has(self.issuerRef) || !has(self.renewBefore) || (self.renewBefore.matches('[0-9]d') ? int(self.renewBefore.find('[0-9]+d').split('d')[0]) * 86400 : 0) + (self.renewBefore.matches('[0-9]h') ? int(self.renewBefore.find('[0-9]+h').split('h')[0]) * 3600 : 0) + (self.renewBefore.matches('[0-9]m') ? int(self.renewBefore.find('[0-9]+m').split('m')[0]) * 60 : 0) + (self.renewBefore.matches('[0-9]s') ? int(self.renewBefore.find('[0-9]+s').split('s')[0]) : 0) >= 300",messageExpression="'spec.tls.renewBefore ' + self.renewBefore + ' is shorter than cert-manager allows (5m); shorter margins need the CA the operator keeps (leave issuerRef unset)'"
type TLSSpec struct {
	// Enabled serves the cluster over TLS only: Redis listens with TLS
	// on 6379 and without it nowhere. It cannot change after creation:
	// replicas with and without TLS cannot replicate from each other, so
	// a cluster moves to TLS by restoring a backup into a new cluster
	// (docs/security.md).
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// IssuerRef names a cert-manager issuer that signs the cluster's
	// certificate: the operator renders a cert-manager Certificate and
	// cert-manager issues and renews it into Secret <name>-tls. Unset:
	// the operator keeps a CA for the cluster (Secret <name>-tls-ca) and
	// issues and renews the certificate itself. It cannot change after
	// creation.
	// +optional
	IssuerRef *IssuerRef `json:"issuerRef,omitempty"`

	// Duration is the server certificate's lifetime, e.g. 90d (the
	// default). With issuerRef cert-manager requires at least 1h.
	// +optional
	// +kubebuilder:default="90d"
	Duration Duration `json:"duration,omitempty"`

	// RenewBefore is how long before its expiry the certificate is
	// renewed: 7d when unset, shorter than duration (at least 5m with
	// issuerRef). The pods load a renewed certificate without a restart.
	// +optional
	// +kubebuilder:default="7d"
	RenewBefore Duration `json:"renewBefore,omitempty"`
}

// IssuerRef names a cert-manager issuer.
type IssuerRef struct {
	// Name of the issuer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`

	// Kind of the issuer: Issuer (the default; in the cluster's
	// namespace) or ClusterIssuer for cert-manager's own issuers, an
	// external issuer's kind otherwise.
	// +optional
	// +kubebuilder:default=Issuer
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Kind string `json:"kind,omitempty"`

	// Group of the issuer's API: cert-manager.io (the default) for
	// cert-manager's own issuers, an external issuer's group otherwise.
	// +optional
	// +kubebuilder:default=cert-manager.io
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Group string `json:"group,omitempty"`
}

// TLSStatus is the cluster's server certificate as the operator last
// issued or read it from Secret <name>-tls. It changes only when the
// certificate is issued or renewed, never on a probe.
type TLSStatus struct {
	// NotAfter is when the server certificate expires.
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty"`

	// RenewalTime is when it is renewed: NotAfter minus
	// spec.tls.renewBefore.
	// +optional
	RenewalTime *metav1.Time `json:"renewalTime,omitempty"`

	// Serial is its serial number in hex, the one every pod serves once
	// the CertificateLoaded condition is True.
	// +optional
	Serial string `json:"serial,omitempty"`

	// CANotAfter is when the CA the operator keeps expires (the operator
	// replaces it before; unset with issuerRef).
	// +optional
	CANotAfter *metav1.Time `json:"caNotAfter,omitempty"`
}
