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
	"syscall"

	"github.com/cacheops/cacheops/test/cluster"
)

func main() {
	dir := flag.String("dir", ".cache/devcluster", "folder for the cluster's state (certificates, etcd data, logs, volumes)")
	bin := flag.String("bin", "bin", "folder with the binaries built by `make tools`")
	crds := flag.String("crds", "charts/cacheops/crds", "folder of CRDs to install; empty installs none")
	ready := flag.String("ready-file", "", "file to create once the cluster serves (for scripts)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts := cluster.Options{Dir: *dir, BinDir: *bin}
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
	fmt.Printf("devcluster: logs in %s\n", c.LogDir())
	if *ready != "" {
		if err := os.WriteFile(*ready, []byte(abs+"\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "devcluster:", err)
		}
	}
	<-ctx.Done()
	fmt.Println("devcluster: stopping")
}
