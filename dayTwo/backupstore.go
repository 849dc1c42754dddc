package daytwo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/backup"
	"github.com/cacheops/cacheops/renderer"
)

// openStore connects to where loc is: its bucket, or the cluster's
// backup-store pod for a claim, which must serve loc.Key (and allow writes
// when write is set).
func (r *Reconciler) openStore(ctx context.Context, cc *cachev1alpha1.CacheCluster, loc cachev1alpha1.BackupLocation, write bool) (*backup.Store, error) {
	switch {
	case loc.S3 != nil:
		t, err := r.s3Target(ctx, cc.Namespace, *loc.S3)
		if err != nil {
			return nil, err
		}
		return backup.NewStore(t)
	case loc.PVC != nil:
		addr, err := r.backupStoreAddr(ctx, cc, loc.PVC.ClaimName, loc.Key, write)
		if err != nil {
			return nil, err
		}
		pw, err := r.password(ctx, cc)
		if err != nil {
			return nil, err
		}
		return backup.NewRemoteStore(addr, pw, loc.PVC.ClaimName), nil
	}
	return nil, fmt.Errorf("backup location %q names neither a bucket nor a claim", loc.Key)
}

// storeNotReadyError: the backup-store pod that serves a claim does not
// answer yet; the message says why, from the pod's status.
type storeNotReadyError struct{ msg string }

func (e *storeNotReadyError) Error() string { return e.msg }

// backupStoreAddr is host:port of the cluster's backup-store pod, when it
// is ready, mounts claim and serves key (for writing, if write is set).
// A pod that does not is being replaced by one that does.
func (r *Reconciler) backupStoreAddr(ctx context.Context, cc *cachev1alpha1.CacheCluster, claim, key string, write bool) (string, error) {
	name := renderer.BackupStoreName(cc) + "-0"
	pod := &corev1.Pod{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: cc.Namespace, Name: name}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &storeNotReadyError{fmt.Sprintf("the backup-store pod %s for claim %s does not exist yet", name, claim)}
		}
		return "", err
	}
	mounted := ""
	for _, v := range pod.Spec.Volumes {
		if v.Name == "backups" && v.PersistentVolumeClaim != nil {
			mounted = v.PersistentVolumeClaim.ClaimName
		}
	}
	if mounted != claim {
		return "", &storeNotReadyError{fmt.Sprintf("the backup-store pod %s mounts claim %q, not %s (it is being replaced)", name, mounted, claim)}
	}
	keyPrefix, readOnly := "", false
	for _, c := range pod.Spec.Containers {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--key-prefix="); ok {
				keyPrefix = v
			}
			readOnly = readOnly || a == "--read-only"
		}
	}
	if !strings.HasPrefix(key, keyPrefix) || (write && readOnly) {
		return "", &storeNotReadyError{fmt.Sprintf("the backup-store pod %s serves %q (read only: %t), not %s (it is being replaced)", name, keyPrefix, readOnly, key)}
	}
	if why := podNotReady(pod); why != "" {
		return "", &storeNotReadyError{fmt.Sprintf("the backup-store pod %s for claim %s is not ready: %s", name, claim, why)}
	}
	return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(backup.StorePort)), nil
}

// podNotReady says why a pod does not serve, in the words of its status;
// empty when it is ready.
func podNotReady(pod *corev1.Pod) string {
	if !pod.DeletionTimestamp.IsZero() {
		return "it is being deleted"
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && pod.Status.PodIP != "" {
			return ""
		}
	}
	var why []string
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			why = append(why, "not scheduled: "+c.Message)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			why = append(why, strings.TrimSpace(cs.State.Waiting.Reason+" "+cs.State.Waiting.Message))
		case cs.State.Terminated != nil:
			why = append(why, fmt.Sprintf("exited with code %d (kubectl logs %s)", cs.State.Terminated.ExitCode, pod.Name))
		case cs.LastTerminationState.Terminated != nil:
			why = append(why, fmt.Sprintf("restarted %d times, last exit code %d (kubectl logs %s --previous)", cs.RestartCount, cs.LastTerminationState.Terminated.ExitCode, pod.Name))
		}
	}
	if len(why) == 0 {
		why = append(why, "phase "+string(pod.Status.Phase))
	}
	return strings.Join(why, "; ")
}

// waitsForStore starts the message of a backup that waits for its store.
const waitsForStore = "waits for the backup store: "

// storeWait is how long a backup waits for the backup-store pod (a new
// claim being bound and attached, the pod rescheduled or replaced) before
// each check counts as a failed attempt.
const storeWait = 5 * time.Minute

// failAttemptBeforeStart handles a backup whose backup-store pod is not
// ready. For storeWait from the first such check it waits, checking
// again every few seconds, without using up an attempt; after that each
// check counts as a failed attempt, retried after a pause and Failed once
// the attempts run out. LastBackupSucceeded says why either way.
func (r *Reconciler) failAttemptBeforeStart(ctx context.Context, cc *cachev1alpha1.CacheCluster, key types.NamespacedName, cb *cachev1alpha1.CacheBackup, cause error) error {
	// The wait began at the first check that found the store not ready
	// (StartTime, while the message says it waits).
	// Once the wait ran out, the attempts that follow (their messages
	// name the store pod) do not start another.
	waiting := strings.HasPrefix(cb.Status.Message, waitsForStore) && cb.Status.StartTime != nil
	since := r.now()
	if waiting {
		since = cb.Status.StartTime.Time
	}
	afterWait := !waiting && strings.Contains(cb.Status.Message, "the backup-store pod")
	if !afterWait && r.now().Sub(since) < storeWait {
		msg := waitsForStore + cause.Error()
		if err := r.updateBackup(ctx, key, func(b *cachev1alpha1.CacheBackup) error {
			if b.UID != cb.UID || b.Status.Attempts != cb.Status.Attempts {
				return errSuperseded
			}
			now, start := metav1.NewTime(r.now()), metav1.NewTime(since)
			b.Status.Phase, b.Status.Message, b.Status.CompletionTime, b.Status.StartTime = cachev1alpha1.BackupPending, msg, &now, &start
			return nil
		}); err != nil {
			if errors.Is(err, errSuperseded) {
				return nil
			}
			return client.IgnoreNotFound(err)
		}
		if cb.Status.Message != msg {
			ctrl.LoggerFrom(ctx).Info("Backup waits for the backup store", "backup", key.Name, "reason", cause.Error())
			r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, cachev1alpha1.EventBackupFailed, "Backup", "Backup %s %s (for up to %s, then each check counts as a failed attempt)", key.Name, msg, storeWait)
		}
		return r.recordFailure(ctx, client.ObjectKeyFromObject(cc), key.Name+" "+msg)
	}
	attempt := cb.Status.Attempts + 1
	if err := r.updateBackup(ctx, key, func(b *cachev1alpha1.CacheBackup) error {
		if b.UID != cb.UID || b.Status.Attempts != cb.Status.Attempts {
			return errSuperseded
		}
		t := metav1.NewTime(r.now())
		b.Status.Phase, b.Status.Attempts, b.Status.StartTime, b.Status.CompletionTime = cachev1alpha1.BackupRunning, attempt, &t, nil
		return nil
	}); err != nil {
		if errors.Is(err, errSuperseded) {
			return nil
		}
		return client.IgnoreNotFound(err)
	}
	r.backupFailed(ctx, cc, key, cb.UID, attempt, context.Background(), cause)
	return nil
}
