// Package chart tests the operator's install chart (charts/cacheops) and the
// Argo CD examples (examples/argocd). Its tests render the chart with Helm's
// own library, then install the rendered ServiceAccount and RBAC into a real
// kube-apiserver (envtest) and run the day-one and day-two reconcilers as that
// ServiceAccount, so a missing permission fails a test instead of a user's
// cluster. It holds tests only; nothing imports it.
package chart
