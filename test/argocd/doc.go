// Package argocd runs a real Argo CD (the application-controller and the
// repo-server of the binary `make tools` builds into bin/argocd, with a
// redis-server as their cache) as local processes against a test cluster,
// and keeps a git repository for it to sync from: a bare repository, as a
// git server holds it, and a work tree that pushes to it. It is for the
// end-to-end tests only: it installs what an Argo CD installation would
// (CRDs aside, which the cluster installs from CRDDirectory), and it must not
// be imported by the operator.
package argocd
