// Package cluster starts a process-backed Kubernetes cluster for end-to-end
// tests and for `make run`: etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler built from pinned module sources (make tools), and nodes
// whose pods run as local processes.
//
// It is test infrastructure: the operator never imports it, and nothing here
// may reach beyond this machine.
package cluster
