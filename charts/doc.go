// Package charts embeds the Helm charts shipped with cacheops, so the operator
// and the CLI render exactly the files in this folder, with no chart
// repository to reach at run time. It holds files only, no logic.
package charts

import "embed"

// CacheCluster is the chart of one CacheCluster's objects (charts/cachecluster).
// The all: prefix keeps files whose names start with _ or ., such as
// templates/_helpers.tpl and .helmignore.
//
//go:embed all:cachecluster
var CacheCluster embed.FS

// CacheClusterRoot is the folder of the chart inside CacheCluster.
const CacheClusterRoot = "cachecluster"

// CacheClusterCRD is the CacheCluster CRD of the operator chart
// (charts/cacheops/crds), for tools that need its schema without an API
// server: the CLI fills in its defaults before comparing a manifest from git
// with the object the API server stored.
//
//go:embed cacheops/crds/cache.cacheops.io_cacheclusters.yaml
var CacheClusterCRD []byte
