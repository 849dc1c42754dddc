//go:build tools

// Package tools pins the Argo CD command built by `make tools`.
package tools

import (
	_ "github.com/argoproj/argo-cd/v3/cmd"
)
