package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	flags := flag.NewFlagSet("backup-store", flag.ContinueOnError)
	dir := flags.String("dir", "/backups", "Folder to serve: where the claim is mounted.")
	claim := flags.String("claim", "", "Name of the claim mounted at --dir, for messages.")
	port := flags.Int("port", backup.StorePort, "Port to listen on.")
	var access backup.Access
	flags.StringVar(&access.KeyPrefix, "key-prefix", "", "Serve only keys under this prefix (the cluster's folder, <prefix><namespace>/<cluster>/).")
	flags.BoolVar(&access.ReadOnly, "read-only", false, "Refuse writes and deletions (a store that only serves a restore).")
	if err := flags.Parse(args); err != nil {
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if !access.ReadOnly {
		// Fail at start, in the pod's log, when the claim cannot be
		// written.
		probe := filepath.Join(*dir, ".cacheops-write-check")
		if err := os.WriteFile(probe, []byte("ok\n"), 0o644); err != nil {
			logf("cannot write to %s (claim %s): %v", *dir, *claim, err)
			return 1
		}
		_ = os.Remove(probe)
		// What uploads cut by a killed pod or a lost node left: at start
		// and every hour.
		folder := filepath.Join(*dir, filepath.FromSlash(access.KeyPrefix))
		go func() {
			tick := time.NewTicker(time.Hour)
			defer tick.Stop()
			for {
				sweepPartials(folder, logf)
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	access.Token = token

	// inFlight lets the shutdown wait for handlers, which remove the
	// partial file of an upload the shutdown cut.
	var inFlight sync.WaitGroup
	handler := backup.Handler(backup.NewDirStore(*dir, "pvc://"+*claim), access, logf)
	srv := &http.Server{
		Addr: net.JoinHostPort("", strconv.Itoa(*port)),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inFlight.Add(1)
			defer inFlight.Done()
			handler.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 30 * time.Second,
	}
	// On SIGTERM, uploads in flight get 20 s to end (the handler removes
	// the partial file of one that is cut) before the process exits.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		_ = srv.Close()
		handled := make(chan struct{})
		go func() { inFlight.Wait(); close(handled) }()
		select {
		case <-handled:
		case <-time.After(5 * time.Second):
		}
	}()
	logf("serving %s (claim %s, keys under %q, read only: %t) on %s", *dir, *claim, access.KeyPrefix, access.ReadOnly, srv.Addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logf("%v", err)
		return 1
	}
	<-stopped
	return 0
}

// sweepPartials removes .partial-* files an hour old under root (younger
// ones may belong to an upload still being written).
func sweepPartials(root string, logf func(string, ...any)) {
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), ".partial-") {
			return nil
		}
		if fi, err := d.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
			if os.Remove(p) == nil {
				logf("removed %s, left by an interrupted upload", p)
			}
		}
		return nil
	})
}
