//go:build tools

// Package tools pins the versitygw S3 server.
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
