package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// backupNow creates a CacheBackup of a live cluster; day-two takes it when
// no other operation runs.
func backupNow(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	var lf liveFlags
	lf.register(fs)
	wait := fs.Duration("wait", 0, "wait this long for the backup to complete (0: return at once)")
	name, err := parseNameFirst(fs, args)
	if err != nil {
		return err
	}
	c, cc, err := lf.get(name)
	if err != nil {
		return err
	}
	if cc.Spec.Backup.S3 == nil && cc.Spec.Backup.PVC == nil {
		return fmt.Errorf("%s/%s has no backup target: set spec.backup.s3 or spec.backup.pvc first", cc.Namespace, name)
	}
	ctx := context.Background()
	cb := &cachev1alpha1.CacheBackup{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s-%s", name, time.Now().UTC().Format("20060102150405")),
			Namespace: cc.Namespace,
			Labels:    map[string]string{cachev1alpha1.LabelCluster: name},
		},
		Spec: cachev1alpha1.CacheBackupSpec{Cluster: name},
	}
	if err := controllerutil.SetControllerReference(cc, cb, c.Scheme()); err != nil {
		return err
	}
	if err := c.Create(ctx, cb); apierrors.IsAlreadyExists(err) {
		// Two in the same second: let the API server add a suffix.
		cb.GenerateName, cb.Name = cb.Name+"-", ""
		err = c.Create(ctx, cb)
		if err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cachebackup/%s created\n", cb.Name)
	if *wait == 0 {
		return nil
	}
	done, err := waitFor(ctx, c, cb, *wait, func() (bool, error) {
		if cb.Status.Phase == cachev1alpha1.BackupFailed {
			return false, fmt.Errorf("backup %s failed: %s", cb.Name, cb.Status.Message)
		}
		return cb.Status.Phase == cachev1alpha1.BackupCompleted, nil
	})
	if err != nil {
		return err
	}
	if !done {
		return fmt.Errorf("backup %s did not complete within %s (phase %s: %s)", cb.Name, *wait, orDash(string(cb.Status.Phase)), cb.Status.Message)
	}
	writeCompleted(stdout, cb)
	return nil
}

// writeCompleted describes a completed backup: its keys, size and
// location, and for a sharded cluster's backup each shard's dump.
func writeCompleted(w io.Writer, cb *cachev1alpha1.CacheBackup) {
	st := cb.Status
	if !cb.IsSharded() {
		fmt.Fprintf(w, "completed: %d keys, %d bytes, %s (%s)\n", st.Keys, st.Size, st.Location, st.Checksum)
		return
	}
	fmt.Fprintf(w, "completed: %d shards, %d keys, %d bytes, %s (manifest %s)\n", len(st.Shards), st.Keys, st.Size, st.Location, st.Checksum)
	for _, sh := range st.Shards {
		fmt.Fprintf(w, "  shard %d, slots %s: %d keys, %d bytes from %s, %s (%s)\n",
			sh.Index, strings.Join(sh.Slots, ","), sh.Keys, sh.Size, sh.SourcePod, path.Base(sh.Key), sh.Checksum)
	}
	if st.Message != "" {
		fmt.Fprintf(w, "  %s\n", st.Message)
	}
}
