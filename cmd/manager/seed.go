package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cacheops/cacheops/dayTwo/access"
	"github.com/cacheops/cacheops/dayTwo/backup"
)

// precheckSeed is the `manager precheck-seed` subcommand, the init
// container of an upgrade's pre-check pod (renderer.RenderPrecheck): it
// takes a dump of a cluster pod by the backup stream (SYNC) and puts it into
// the pre-check pod's empty data folder, so the new version starts on a copy
// of the cluster's real data. What the dump held goes to --report, the
// container's termination message, which the operator compares with the
// key count of the started server.
func precheckSeed(args []string) int {
	fs := flag.NewFlagSet("precheck-seed", flag.ContinueOnError)
	var from, dataDir, report string
	var timeout time.Duration
	fs.StringVar(&from, "from", "", "Address (host:port) of the cluster pod the copy is taken from; the password is read from $REDIS_PASSWORD, the CA bundle of a TLS cluster from the file $REDIS_TLS_CA_FILE names (the certificate must carry $REDIS_TLS_SERVER_NAME).")
	fs.StringVar(&dataDir, "data-dir", "/data", "The pre-check pod's (empty) data directory.")
	fs.StringVar(&report, "report", "", "File the report is written to: the container's terminationMessagePath.")
	fs.DurationVar(&timeout, "timeout", 30*time.Second, "How long each wait for the source may last.")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if from == "" {
		fmt.Fprintln(os.Stderr, "precheck-seed: --from is required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fail := func(err error) int {
		msg := fmt.Sprintf("copying the data of %s: %v", from, err)
		fmt.Fprintln(os.Stderr, "precheck-seed:", msg)
		if report != "" {
			_ = os.WriteFile(report, []byte(msg), 0o644)
		}
		return 1
	}
	acc, err := access.FromEnv()
	if err != nil {
		return fail(err)
	}
	res, err := backup.Seed(ctx, backup.Source{Addr: from, Access: acc, Timeout: timeout}, dataDir)
	if err != nil {
		return fail(err)
	}
	line := backup.SeedReportOf(res, from).Format()
	fmt.Fprintln(os.Stderr, "precheck-seed: copied", line)
	if report != "" {
		if err := os.WriteFile(report, []byte(line), 0o644); err != nil {
			return fail(err)
		}
	}
	return 0
}
