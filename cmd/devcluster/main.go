// Command devcluster runs the process-backed Kubernetes cluster of package
// test/cluster until interrupted, for `make run` and for people who want a
// cluster without Docker or kind.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cacheops/cacheops/test/cluster"
)

func main() {
	dir := flag.String("dir", ".cache/devcluster", "folder for the cluster's state (certificates, etcd data, logs, volumes)")
	bin := flag.String("bin", "bin", "folder with the binaries built by `make tools`")
	crds := flag.String("crds", "charts/cacheops/crds", "folder of CRDs to install; empty installs none")
	ready := flag.String("ready-file", "", "file to create once the cluster serves (for scripts)")
	nodes := flag.String("nodes", "node-a=zone-a,node-b=zone-b,node-c=zone-c", "comma-separated NAME=ZONE of the process-backed nodes")
	controlPlaneOnly := flag.Bool("control-plane-only", false, "start no nodes (no pods will run)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts := cluster.Options{Dir: *dir, BinDir: *bin, ControlPlaneOnly: *controlPlaneOnly}
	// The operator's image runs the manager built next to the tools (for
	// the init container of restored clusters).
	if manager, err := filepath.Abs(filepath.Join(*bin, "manager")); err == nil {
		opts.Images = append(cluster.DefaultImages(), cluster.OperatorImage(manager))
	}
	for _, spec := range strings.Split(*nodes, ",") {
		if spec = strings.TrimSpace(spec); spec == "" {
			continue
		}
		name, zone, _ := strings.Cut(spec, "=")
		opts.Nodes = append(opts.Nodes, cluster.NodeOptions{Name: name, Zone: zone})
	}
	if *crds != "" {
		opts.CRDDirectories = []string{*crds}
	}
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		os.Exit(1)
	}
	defer c.Stop()

	abs, _ := filepath.Abs(c.Kubeconfig())
	fmt.Printf("devcluster: serving; kubeconfig %s\n", abs)
	fmt.Printf("devcluster: logs in %s (containers: %s)\n", c.LogDir(), c.PodLogDir())
	if gw := c.Gateway(); gw != "" {
		fmt.Printf("devcluster: pod network gateway %s; pod IPs are reachable from this machine\n", gw)
	}
	if *ready != "" {
		if err := os.WriteFile(*ready, []byte(abs+"\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "devcluster:", err)
		}
	}
	<-ctx.Done()
	fmt.Println("devcluster: stopping")
}
