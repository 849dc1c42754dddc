package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cacheops/cacheops/dayTwo/backup"
)

// restore is the `manager restore` subcommand, run as an init container of
// a cluster created with spec.restore: it puts the dump into the data
// directory before redis-server starts.
func restore(args []string) int {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	var t backup.Target
	var key, dataDir, caFile, stateFile string
	fs.StringVar(&t.Endpoint, "endpoint", "", "S3 endpoint, host[:port].")
	fs.StringVar(&t.Bucket, "bucket", "", "Bucket that holds the dump.")
	fs.StringVar(&t.Region, "region", "", "Region of the bucket.")
	fs.BoolVar(&t.Insecure, "insecure", false, "Plain HTTP instead of HTTPS.")
	fs.StringVar(&caFile, "ca-file", "", "PEM file with the CA of the endpoint's certificate.")
	fs.StringVar(&key, "key", "", "Object key of the dump.")
	fs.StringVar(&dataDir, "data-dir", "/data", "Redis data directory.")
	fs.StringVar(&stateFile, "state-file", "", "File whose content \"done\" means the cluster was restored already: new pods get their data by replication.")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if stateFile != "" {
		if b, err := os.ReadFile(stateFile); err == nil && strings.TrimSpace(string(b)) == "done" {
			fmt.Fprintln(os.Stderr, "restore: the cluster was restored already; this pod gets its data by replication")
			return 0
		}
	}
	t.AccessKeyID, t.SecretAccessKey = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if t.Endpoint == "" || t.Bucket == "" || key == "" {
		fmt.Fprintln(os.Stderr, "restore: --endpoint, --bucket and --key are required")
		return 2
	}
	if caFile != "" {
		ca, err := os.ReadFile(caFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "restore:", err)
			return 1
		}
		t.CA = ca
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	store, err := backup.NewStore(t)
	if err != nil {
		fmt.Fprintln(os.Stderr, "restore:", err)
		return 1
	}
	logf := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "restore: "+format+"\n", a...) }
	if _, err := backup.RestoreInto(ctx, store, key, dataDir, logf); err != nil {
		fmt.Fprintln(os.Stderr, "restore:", err)
		return 1
	}
	return 0
}
