package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/cacheops/cacheops/dayTwo/backup"
)

// backupStore is the `manager backup-store` subcommand, the pod of
// StatefulSet <cluster>-backup-store: it serves the folder where a
// PersistentVolumeClaim backup target is mounted to the operator, which
// streams dumps into it, reads their metadata and removes what retention
// drops. Requests carry the cluster's password (CACHEOPS_STORE_TOKEN).
func backupStore(args []string) int {
	fs := flag.NewFlagSet("backup-store", flag.ContinueOnError)
	dir := fs.String("dir", "/backups", "Folder to serve: where the claim is mounted.")
	claim := fs.String("claim", "", "Name of the claim mounted at --dir, for messages.")
	port := fs.Int("port", backup.StorePort, "Port to listen on.")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s backup-store: "+format+"\n", append([]any{time.Now().UTC().Format(time.RFC3339)}, a...)...)
	}
	token := os.Getenv("CACHEOPS_STORE_TOKEN")
	if token == "" {
		logf("CACHEOPS_STORE_TOKEN is empty: set it to the cluster's password")
		return 2
	}
	// Fail at start, in the pod's log, when the claim cannot be written.
	probe := filepath.Join(*dir, ".cacheops-write-check")
	if err := os.WriteFile(probe, []byte("ok\n"), 0o644); err != nil {
		logf("cannot write to %s (claim %s): %v", *dir, *claim, err)
		return 1
	}
	_ = os.Remove(probe)

	srv := &http.Server{
		Addr:              net.JoinHostPort("", strconv.Itoa(*port)),
		Handler:           backup.Handler(backup.NewDirStore(*dir, "pvc://"+*claim), token, logf),
		ReadHeaderTimeout: 30 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	logf("serving %s (claim %s) on %s", *dir, *claim, srv.Addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logf("%v", err)
		return 1
	}
	return 0
}
