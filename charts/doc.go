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
