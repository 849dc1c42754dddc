package daytwo

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
)

// scheduleBackups runs the backup schedule. An error is logged, not
// returned: a schedule must never hold up a failover.
func (r *Reconciler) scheduleBackups(ctx context.Context, s *scope) error {
	next, err := r.schedule(ctx, s)
	if apierrors.IsConflict(err) {
		return err
	}
	if err != nil {
		stepErrors.WithLabelValues("schedule backups", errorReason(err)).Inc()
		ctrl.LoggerFrom(ctx).Error(err, "Scheduling a backup")
	}
	s.nextBackup = next
	return nil
}

// schedule creates the CacheBackup the schedule asks for, once per due
// time (after an outage, one for the latest missed time), and tells when
// the next is due.
func (r *Reconciler) schedule(ctx context.Context, s *scope) (time.Duration, error) {
	cc, backups := s.cc, s.backups
	bs := cc.Spec.Backup
	if !bs.Enabled || (bs.S3 == nil && bs.PVC == nil) {
		labels := prometheus.Labels{"namespace": cc.Namespace, "cluster": cc.Name}
		backupInterval.DeletePartialMatch(labels)
		backupLastSuccess.DeletePartialMatch(labels)
		return 0, nil
	}
	sched, err := cachev1alpha1.ParseSchedule(bs.Schedule)
	if err != nil {
		return 0, nil // day-one reports it as Stalled
	}
	recordScheduleMetrics(cc, sched)
	if meta.IsStatusConditionTrue(cc.Status.Conditions, cachev1alpha1.ConditionDataLost) {
		// A backup of what is left after a loss would only push the
		// backups from before it out; the schedule waits.
		return 0, nil
	}
	last := cc.CreationTimestamp.Time
	if cc.Status.Backup != nil && cc.Status.Backup.LastScheduleTime != nil {
		last = cc.Status.Backup.LastScheduleTime.Time
	}
	now := r.now()
	due, ok := plan.LatestDue(sched, last, now)
	if !ok {
		if next := sched.Next(last); !next.IsZero() {
			return next.Sub(now), nil
		}
		return 0, nil // never fires; day-one reports it as Stalled
	}
	// One scheduled backup at a time: while the last one still waits or
	// runs (a backup longer than the interval), this due time is skipped.
	for _, b := range backups {
		if b.Labels[LabelScheduled] == "true" && b.Status.Phase != cachev1alpha1.BackupCompleted && b.Status.Phase != cachev1alpha1.BackupFailed {
			s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventBackupSkipped, "Schedule",
				"Scheduled backup due at %s skipped: %s has not finished yet", due.UTC().Format(time.RFC3339), b.Name)
			s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
				st.Backup = withScheduleTime(st.Backup, due)
			})
			return sched.Next(due).Sub(now), nil
		}
	}
	name := fmt.Sprintf("%s-%s", cc.Name, due.UTC().Format("20060102150405"))
	cb := &cachev1alpha1.CacheBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cc.Namespace, Labels: map[string]string{
			cachev1alpha1.LabelCluster: cc.Name, LabelScheduled: "true",
		}},
		Spec: cachev1alpha1.CacheBackupSpec{Cluster: cc.Name},
	}
	if err := controllerutil.SetControllerReference(cc, cb, r.Client.Scheme()); err != nil {
		return 0, err
	}
	if err := r.Client.Create(ctx, cb); err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, err
	}
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
		st.Backup = withScheduleTime(st.Backup, due)
	})
	ctrl.LoggerFrom(ctx).Info("Scheduled backup created", "backup", name, "due", due)
	return sched.Next(due).Sub(now), nil
}

// recordScheduleMetrics exports what the backup alert needs: the
// schedule's interval and the last success.
func recordScheduleMetrics(cc *cachev1alpha1.CacheCluster, sched cron.Schedule) {
	first := sched.Next(time.Now())
	if second := sched.Next(first); !first.IsZero() && !second.IsZero() {
		backupInterval.WithLabelValues(cc.Namespace, cc.Name).Set(second.Sub(first).Seconds())
	}
	last := cc.CreationTimestamp.Time
	if b := cc.Status.Backup; b != nil && b.LastSuccessfulTime != nil {
		last = b.LastSuccessfulTime.Time
	}
	backupLastSuccess.WithLabelValues(cc.Namespace, cc.Name).Set(float64(last.Unix()))
}

func withScheduleTime(b *cachev1alpha1.BackupStatus, due time.Time) *cachev1alpha1.BackupStatus {
	out := &cachev1alpha1.BackupStatus{}
	if b != nil {
		out = b.DeepCopy()
	}
	t := metav1.NewTime(due)
	out.LastScheduleTime = &t
	return out
}
