package daytwo

import (
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/dayTwo/probe"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	failovers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cacheops_failovers_total",
		Help: "Completed failovers by cluster.",
	}, []string{"namespace", "cluster"})

	failoversAverted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cacheops_failovers_averted_total",
		Help: "Masters that missed their probes past the probe timeout but answered the last look before a failover, by cluster.",
	}, []string{"namespace", "cluster"})

	failoverDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cacheops_failover_duration_seconds",
		Help:    "Time from recording a failover to its completion.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30},
	}, []string{"namespace", "cluster"})

	podRole = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cacheops_redis_role",
		Help: "1 when the pod is the recorded master, 0 when it is a replica.",
	}, []string{"namespace", "cluster", "pod"})

	replicationLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cacheops_replication_lag_bytes",
		Help: "Master replication offset minus the replica's, as last probed.",
	}, []string{"namespace", "cluster", "pod"})

	podReachable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cacheops_redis_reachable",
		Help: "1 when the pod's Redis answered the last probe.",
	}, []string{"namespace", "cluster", "pod"})

	switchovers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cacheops_switchovers_total",
		Help: "Completed switchovers (the master role moved while the master was healthy) by cluster.",
	}, []string{"namespace", "cluster"})

	podRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cacheops_pod_restarts_total",
		Help: "Pods restarted by upgrades and rollbacks, by cluster.",
	}, []string{"namespace", "cluster"})

	upgradeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cacheops_upgrade_duration_seconds",
		Help:    "Time from the start of an upgrade (pre-check included) to its end.",
		Buckets: []float64{5, 10, 30, 60, 120, 300, 600, 1800},
	}, []string{"namespace", "cluster"})

	backupDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cacheops_backup_duration_seconds",
		Help:    "Time to stream a completed backup to its target.",
		Buckets: []float64{1, 5, 15, 30, 60, 300, 900, 3600},
	}, []string{"namespace", "cluster"})

	backupSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cacheops_backup_size_bytes",
		Help: "Size of the last completed backup.",
	}, []string{"namespace", "cluster"})

	backupLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cacheops_backup_last_success_timestamp_seconds",
		Help: "When the last backup completed (Unix time); the cluster's creation time while none has, so a schedule that never succeeds alerts too.",
	}, []string{"namespace", "cluster"})

	servedExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cacheops_tls_served_certificate_expiry_timestamp_seconds",
		Help: "When the certificate a pod's server presented at day-two's last look expires (Unix time): a renewed certificate the pod did not load shows here.",
	}, []string{"namespace", "cluster", "pod"})

	backupInterval = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cacheops_backup_schedule_interval_seconds",
		Help: "Time between two due times of the cluster's backup schedule; absent when scheduled backups are off.",
	}, []string{"namespace", "cluster"})
)

func init() {
	metrics.Registry.MustRegister(failovers, failoversAverted, failoverDuration, podRole, replicationLag, podReachable, switchovers, podRestarts, upgradeDuration,
		backupDuration, backupSize, backupLastSuccess, backupInterval, servedExpiry)
}

// recordMetrics exports what the last probes saw. Offsets and lag live here,
// not in the status, because they change on every write.
func recordMetrics(key types.NamespacedName, master string, pods []plan.PodState) {
	var masterOffset int64
	for _, p := range pods {
		if p.Name == master && p.Observed {
			masterOffset = p.Obs.Offset
		}
	}
	for _, p := range pods {
		if !p.Observed {
			continue
		}
		role := 0.0
		if p.Name == master {
			role = 1
		}
		podRole.WithLabelValues(key.Namespace, key.Name, p.Name).Set(role)
		reach := 0.0
		if p.Obs.Reachable {
			reach = 1
		}
		podReachable.WithLabelValues(key.Namespace, key.Name, p.Name).Set(reach)
		if p.Name != master && masterOffset > 0 {
			replicationLag.WithLabelValues(key.Namespace, key.Name, p.Name).Set(float64(max(masterOffset-p.Obs.Offset, 0)))
		}
	}
}

// forgetMetrics drops the series of a deleted cluster.
func forgetMetrics(key types.NamespacedName) {
	labels := prometheus.Labels{"namespace": key.Namespace, "cluster": key.Name}
	podRole.DeletePartialMatch(labels)
	replicationLag.DeletePartialMatch(labels)
	podReachable.DeletePartialMatch(labels)
	probe.ForgetMetrics(key)
	failovers.DeletePartialMatch(labels)
	failoversAverted.DeletePartialMatch(labels)
	failoverDuration.DeletePartialMatch(labels)
	switchovers.DeletePartialMatch(labels)
	podRestarts.DeletePartialMatch(labels)
	upgradeDuration.DeletePartialMatch(labels)
	backupDuration.DeletePartialMatch(labels)
	backupSize.DeletePartialMatch(labels)
	backupLastSuccess.DeletePartialMatch(labels)
	backupInterval.DeletePartialMatch(labels)
	servedExpiry.DeletePartialMatch(labels)
}
