// Package controller is the day-one reconciler of cacheops: it renders a
// CacheCluster with package renderer, applies the objects with server-side
// apply (field manager "cacheops"), prunes what is no longer rendered, and
// reports the children's health as phase, conditions and observedGeneration.
// It also writes the Secrets the pods need before they start: the generated
// password (auth.go) and, with spec.tls, the certificates of the cluster's
// CA, renewed on time (tls.go; cert-manager's with an issuer,
// tls_issued.go).
//
// It never writes a CacheCluster's spec and never talks to Redis: roles,
// failover and ordered restarts belong to the day-two controller (dayTwo).
package controller
