package controller

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

var (
	reconcileOutcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cacheops_reconcile_total",
		Help: "Reconciles by controller and outcome (success, error).",
	}, []string{"controller", "outcome"})

	reconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cacheops_reconcile_duration_seconds",
		Help:    "Time one reconcile took, by controller.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"controller"})
)

func init() {
	metrics.Registry.MustRegister(reconcileOutcomes, reconcileDuration)
}

func observeReconcile(controller string, start time.Time, err error) {
	outcome := "success"
	if err != nil {
		outcome = "error"
	}
	reconcileOutcomes.WithLabelValues(controller, outcome).Inc()
	reconcileDuration.WithLabelValues(controller).Observe(time.Since(start).Seconds())
}

// phaseCollector reports how many CacheClusters are in each phase, counted
// from the informer cache when Prometheus scrapes, so it is always current
// and costs nothing between scrapes.
type phaseCollector struct {
	reader cache.Cache
	desc   *prometheus.Desc
	// expiry and renewal are the certificates' times from status.tls,
	// read in the same pass.
	expiry, renewal *prometheus.Desc
}

var allPhases = []cachev1alpha1.Phase{
	cachev1alpha1.PhasePending, cachev1alpha1.PhaseInitializing, cachev1alpha1.PhaseRunning,
	cachev1alpha1.PhaseScaling, cachev1alpha1.PhaseUpgrading, cachev1alpha1.PhaseBackupRunning,
	cachev1alpha1.PhaseDegraded, cachev1alpha1.PhaseFailed,
}

func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	if c.expiry != nil {
		ch <- c.expiry
		ch <- c.renewal
	}
}

func (c *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	list := &cachev1alpha1.CacheClusterList{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.reader.List(ctx, list); err != nil {
		return
	}
	counts := map[cachev1alpha1.Phase]int{}
	for _, cc := range list.Items {
		if t := cc.Status.TLS; t != nil && c.expiry != nil {
			// Certificates, from status.tls: their expiry and the
			// renewal the operator (or cert-manager) is due to make.
			if t.NotAfter != nil {
				ch <- prometheus.MustNewConstMetric(c.expiry, prometheus.GaugeValue, float64(t.NotAfter.Unix()), cc.Namespace, cc.Name, "server")
			}
			if t.CANotAfter != nil {
				ch <- prometheus.MustNewConstMetric(c.expiry, prometheus.GaugeValue, float64(t.CANotAfter.Unix()), cc.Namespace, cc.Name, "ca")
			}
			if t.RenewalTime != nil {
				ch <- prometheus.MustNewConstMetric(c.renewal, prometheus.GaugeValue, float64(t.RenewalTime.Unix()), cc.Namespace, cc.Name)
			}
		}
		phase := cc.Status.Phase
		if phase == "" {
			phase = cachev1alpha1.PhasePending
		}
		counts[phase]++
	}
	for _, p := range allPhases {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[p]), string(p))
	}
}

var registerPhaseOnce sync.Once

// registerPhaseMetric registers cacheops_clusters and the certificate
// times once per process.
func registerPhaseMetric(c cache.Cache) {
	registerPhaseOnce.Do(func() {
		metrics.Registry.MustRegister(&phaseCollector{
			reader: c,
			desc:   prometheus.NewDesc("cacheops_clusters", "CacheClusters by phase.", []string{"phase"}, nil),
			expiry: prometheus.NewDesc("cacheops_tls_certificate_expiry_timestamp_seconds",
				"When a CacheCluster's certificate expires (Unix time): the server certificate in Secret <name>-tls, and the CA the operator keeps.",
				[]string{"namespace", "cluster", "certificate"}, nil),
			renewal: prometheus.NewDesc("cacheops_tls_certificate_renewal_timestamp_seconds",
				"When a CacheCluster's server certificate is due for renewal (Unix time): its expiry minus spec.tls.renewBefore.",
				[]string{"namespace", "cluster"}, nil),
		})
	})
}
