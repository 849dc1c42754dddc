// Package renderer is the day-one side of cacheops as a pure function: a
// CacheCluster becomes chart values (Values), and the embedded
// charts/cachecluster chart becomes sorted Kubernetes objects (Render) — the
// same objects `helm template charts/cachecluster -f values.yaml` prints.
//
// It must not talk to a cluster: no client, no clock, no randomness. The
// reconciler that applies its output lives in renderer/controller; the CLI's
// render and plan commands call it offline.
package renderer
