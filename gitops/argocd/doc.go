// Package argocd holds the Argo CD health check for CacheClusters: a Lua
// script in Argo CD's resource_customizations layout
// (cache.cacheops.io/CacheCluster/health.lua with health_test.yaml and
// testdata), and an argocd-cm fragment for installing it by hand.
// EvalHealth runs such a script the way Argo CD does, in gopher-lua without
// the string library, so the tests prove the script works where it will run.
package argocd
