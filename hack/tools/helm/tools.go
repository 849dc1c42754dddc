//go:build tools

// Package tools pins the helm CLI.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
