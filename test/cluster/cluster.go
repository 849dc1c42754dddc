package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
)

// Options configures a cluster.
type Options struct {
	// Dir holds the cluster's state: certificates, etcd data, logs, volumes.
	Dir string
	// BinDir holds the control-plane binaries built by `make tools`.
	BinDir string
	// CRDDirectories are installed once the API server is up.
	CRDDirectories []string
}

// Cluster is a running cluster. Stop it when done.
type Cluster struct {
	opts Options
	cp   *controlPlane
}

// Start starts the control plane and returns when the API server serves.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Dir == "" {
		return nil, fmt.Errorf("cluster: Options.Dir is required")
	}
	if o.BinDir == "" {
		return nil, fmt.Errorf("cluster: Options.BinDir is required")
	}
	var err error
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return nil, err
	}
	if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	cp, err := startControlPlane(ctx, o)
	if err != nil {
		return nil, err
	}
	return &Cluster{opts: o, cp: cp}, nil
}

// Kubeconfig is the path of an admin kubeconfig for the cluster.
func (c *Cluster) Kubeconfig() string { return c.cp.kubeconfig }

// Config is an admin client configuration.
func (c *Cluster) Config() *rest.Config { return rest.CopyConfig(c.cp.config) }

// LogDir holds the control plane's logs.
func (c *Cluster) LogDir() string { return c.cp.logDir }

// RestartAPIServer stops and starts kube-apiserver, keeping its address.
func (c *Cluster) RestartAPIServer() error { return c.cp.restartAPIServer() }

// Stop stops everything the cluster started.
func (c *Cluster) Stop() {
	c.cp.stop()
}
