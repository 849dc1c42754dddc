// Package certificates is the operator's own certificate authority for
// clusters with spec.tls and no cert-manager issuer: what a cluster's
// server certificate must name, when a certificate or the CA is due for
// renewal (Decide, a pure function of the clock and what the Secrets
// hold), and making the keys and certificates. The day-one controller
// writes what it makes into the cluster's Secrets; nothing here talks to
// the API server.
package certificates
