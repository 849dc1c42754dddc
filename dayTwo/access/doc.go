// Package access says how the operator reaches a pod's Redis: the
// credentials it authenticates with and, for a cluster served over TLS,
// the client side of TLS (the CA the server's certificate is checked
// against, the name it must carry). Every connection the operator opens to
// a pod — the prober's, day-two's commands, the backup stream, the
// pre-check's seed — is dialed through one Config, so a new way in (TLS,
// an ACL user) is added here once.
//
// It holds no state and talks to no API server: the day-two reconciler
// builds a Config from what it read (Secrets), the init containers from
// their environment (FromEnv).
package access
