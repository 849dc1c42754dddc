package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cacheops/cacheops/dayTwo/backup"
)

// restore is the `manager restore` subcommand, run as an init container of
// a cluster created with spec.restore or with spec.backup.autoRestore: it
// puts the dump into the data directory before redis-server starts. The
// ConfigMap mounted at --config-dir says whether a restore is pending, of
// which dump, and which disaster recovery may replace existing data.
func restore(args []string) int {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	var t backup.Target
	var key, dataDir, caFile, configDir, dir, claim string
	fs.StringVar(&t.Endpoint, "endpoint", "", "S3 endpoint, host[:port].")
	fs.StringVar(&t.Bucket, "bucket", "", "Bucket that holds the dump.")
	fs.StringVar(&t.Region, "region", "", "Region of the bucket.")
	fs.BoolVar(&t.Insecure, "insecure", false, "Plain HTTP instead of HTTPS.")
	fs.StringVar(&caFile, "ca-file", "", "PEM file with the CA of the endpoint's certificate.")
	fs.StringVar(&dir, "dir", "", "Folder that holds the dump (a mounted PersistentVolumeClaim), instead of an S3 bucket.")
	fs.StringVar(&claim, "claim", "", "Name of the claim mounted at --dir, for messages.")
	fs.StringVar(&key, "key", "", "Object key of the dump, when --config-dir has no key file.")
	fs.StringVar(&dataDir, "data-dir", "/data", "Redis data directory.")
	fs.StringVar(&configDir, "config-dir", "", "Folder with the files state (\"done\": nothing to restore, new pods get their data by replication), key (the dump) and replace (the disaster recovery that may replace existing data); for a sharded cluster also shards and podsPerShard, with the pod's name in $POD_NAME.")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var replace string
	var shard, shards int
	sharded := false
	if configDir != "" {
		read := func(name string) string {
			b, _ := os.ReadFile(filepath.Join(configDir, name))
			return strings.TrimSpace(string(b))
		}
		if read("state") == "done" {
			fmt.Fprintln(os.Stderr, "restore: nothing to restore; this pod gets its data by replication")
			return 0
		}
		if k := read("key"); k != "" {
			key = k
		}
		replace = read("replace")
		if pps := read("podsPerShard"); pps != "" {
			sharded = true
			var lead bool
			var err error
			shard, shards, lead, err = shardOfPod(os.Getenv("POD_NAME"), pps, read("shards"))
			if err != nil {
				fmt.Fprintln(os.Stderr, "restore:", err)
				return 2
			}
			if !lead {
				// CLUSTER REPLICATE refuses a node that holds keys or
				// slots: the shard's other pods start empty and get the
				// data by replication from its first pod.
				fmt.Fprintf(os.Stderr, "restore: %s is a replica of shard %d; it gets the shard's data by replication\n", os.Getenv("POD_NAME"), shard)
				return 0
			}
		}
	}
	if key == "" || (dir == "" && (t.Endpoint == "" || t.Bucket == "")) {
		fmt.Fprintln(os.Stderr, "restore: --key and either --dir or --endpoint and --bucket are required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var store *backup.Store
	if dir != "" {
		store = backup.NewDirStore(dir, "pvc://"+claim)
	} else {
		t.AccessKeyID, t.SecretAccessKey = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
		if caFile != "" {
			ca, err := os.ReadFile(caFile)
			if err != nil {
				fmt.Fprintln(os.Stderr, "restore:", err)
				return 1
			}
			t.CA = ca
		}
		var err error
		if store, err = backup.NewStore(t); err != nil {
			fmt.Fprintln(os.Stderr, "restore:", err)
			return 1
		}
	}
	logf := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "restore: "+format+"\n", a...) }
	if sharded {
		if _, err := backup.RestoreShardInto(ctx, store, key, shard, shards, dataDir, logf); err != nil {
			fmt.Fprintln(os.Stderr, "restore:", err)
			return 1
		}
		return 0
	}
	if _, err := backup.RestoreInto(ctx, store, key, dataDir, replace, logf); err != nil {
		fmt.Fprintln(os.Stderr, "restore:", err)
		return 1
	}
	return 0
}

// shardOfPod is the shard of a sharded cluster's pod (name-<ordinal>), the
// cluster's shard count, and whether the pod is its shard's first, the one
// that loads the shard's dump.
func shardOfPod(pod, podsPerShard, shards string) (shard, count int, lead bool, err error) {
	pps, err := strconv.Atoi(podsPerShard)
	if err != nil || pps < 1 {
		return 0, 0, false, fmt.Errorf("podsPerShard %q is not a positive number", podsPerShard)
	}
	if count, err = strconv.Atoi(shards); err != nil || count < 1 {
		return 0, 0, false, fmt.Errorf("shards %q is not a positive number", shards)
	}
	i := strings.LastIndexByte(pod, '-')
	ordinal, err := strconv.Atoi(pod[i+1:])
	if i < 0 || err != nil || ordinal < 0 {
		return 0, 0, false, fmt.Errorf("POD_NAME %q does not end in a StatefulSet ordinal", pod)
	}
	return ordinal / pps, count, ordinal%pps == 0, nil
}
