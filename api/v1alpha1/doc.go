// Package v1alpha1 holds the cache.cacheops.io/v1alpha1 API: the CacheCluster
// kind, its validation markers (OpenAPI and CEL, enforced by the API server at
// admission) and the condition and phase names shared by both controllers.
//
// It imports only Kubernetes API types and apimachinery (and, to parse
// spec.backup.schedule, the dependency-free cron parser robfig/cron), never
// controllers or clients, so that any program can read our objects without
// pulling in the operator.
//
// +kubebuilder:object:generate=true
// +groupName=cache.cacheops.io
package v1alpha1
