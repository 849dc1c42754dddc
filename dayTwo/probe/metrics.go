package probe

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// redisKeys is set on every probe, not on every reconcile: it follows the
// data between the controller's wake-ups.
var redisKeys = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "cacheops_redis_keys",
	Help: "Keys in the pod's Redis (all databases), as last probed.",
}, []string{"namespace", "cluster", "pod"})

func init() { metrics.Registry.MustRegister(redisKeys) }

// ForgetMetrics drops the series of a deleted cluster.
func ForgetMetrics(key types.NamespacedName) {
	labels := prometheus.Labels{"namespace": key.Namespace, "cluster": key.Name}
	redisKeys.DeletePartialMatch(labels)
	deleteShard(labels)
}
