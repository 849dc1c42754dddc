//go:build e2e

package benchmarks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cacheops/cacheops/test/cluster"
)

// BenchmarkClaimBinding measures, without a pod, the volume binding the
// scale benchmark's come-up waits on: SCALE_CLAIMS claims (default 900,
// three a namespace, as 300 CacheClusters have) of the default class,
// each created with the node the scheduler would have picked
// (volume.kubernetes.io/selected-node, round robin over the three nodes).
// kube-controller-manager's volume binder then writes the provisioner's
// annotation, the process-backed cluster's provisioner makes the volume,
// and the binder binds the two. "baseline" is 30 claims. It reports the
// time from the first create until all are bound, claims bound a minute,
// each claim's create → bound (median, worst), and the API server's claim
// writes over the run (count, mean latency, conflicts), read from its
// metrics. The manager runs but has nothing to do. Set against the fleet
// runs in docs/scale.md, it says how much of the fleet's come-up is the
// binder's own pace and how much the load of the pods around it.
func BenchmarkClaimBinding(b *testing.B) {
	n := envInt("SCALE_CLAIMS", 900)
	env := startScaleEnv(b, n/3, false)
	defer env.stop(b)
	cfg := env.c.Config()
	cfg.QPS, cfg.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, prefix string, count int) {
		b.StopTimer()
		ctx := context.Background()
		before := apiServerMetrics(b, cs)
		created := map[string]time.Time{}
		first := time.Now()
		nodes := []string{"node-a", "node-b", "node-c"}
		for i := 0; i < count; i++ {
			ns := fmt.Sprintf("%s-%03d", prefix, i/3)
			if i%3 == 0 {
				if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("data-cache-%d", i%3), Namespace: ns,
					Annotations: map[string]string{"volume.kubernetes.io/selected-node": nodes[i%3]},
				},
				Spec: corev1.PersistentVolumeClaimSpec{
					StorageClassName: ptr.To(cluster.StorageClassName),
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
				},
			}
			if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			created[ns+"/"+pvc.Name] = time.Now()
		}
		logf(b, "created %d claims in %s", count, time.Since(first).Round(time.Millisecond))
		bound := map[string]time.Duration{}
		limit := time.Duration(envInt("SCALE_READY_MINUTES", 30)) * time.Minute
		last := -1
		for len(bound) < count && time.Since(first) < limit {
			list, err := cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
			if err == nil {
				now := time.Now()
				for _, pvc := range list.Items {
					key := pvc.Namespace + "/" + pvc.Name
					t0, ours := created[key]
					if _, seen := bound[key]; ours && !seen && pvc.Status.Phase == corev1.ClaimBound {
						bound[key] = now.Sub(t0)
					}
				}
				if len(bound)/100 != last/100 {
					logf(b, "%d of %d claims bound after %s (load %.1f)", len(bound), count, time.Since(first).Round(time.Second), loadAverage())
					last = len(bound)
				}
			}
			time.Sleep(time.Second)
		}
		all := time.Since(first)
		if len(bound) < count {
			b.Fatalf("only %d of %d claims bound within %s", len(bound), count, limit)
		}
		var each []time.Duration
		for _, d := range bound {
			each = append(each, d)
		}
		slices.Sort(each)
		after := apiServerMetrics(b, cs)
		puts := apiServerDelta(before, after, "apiserver_request_total", `resource="persistentvolumeclaims"`, `verb="PUT"`)
		putSeconds := apiServerDelta(before, after, "apiserver_request_duration_seconds_sum", `resource="persistentvolumeclaims"`, `verb="PUT"`)
		conflicts := apiServerDelta(before, after, "apiserver_request_total", `resource="persistentvolumeclaims"`, `code="409"`)
		b.ReportMetric(all.Seconds(), "all_bound_s")
		b.ReportMetric(float64(count)/all.Minutes(), "claims_bound_per_min")
		b.ReportMetric(each[len(each)/2].Seconds(), "bound_p50_s")
		b.ReportMetric(each[len(each)-1].Seconds(), "bound_max_s")
		b.ReportMetric(puts, "claim_puts")
		b.ReportMetric(conflicts, "claim_conflicts")
		if puts > 0 {
			b.ReportMetric(putSeconds/puts, "claim_put_mean_s")
		}
		logf(b, "%d claims bound %s after the first create (%.1f a minute); create → bound p50 %s, max %s; %.0f claim PUTs at %.3f s, %.0f conflicts; load %.1f",
			count, all.Round(time.Second), float64(count)/all.Minutes(), each[len(each)/2].Round(time.Millisecond), each[len(each)-1].Round(time.Millisecond),
			puts, putSeconds/max(puts, 1), conflicts, loadAverage())
	}
	b.Run("baseline", func(b *testing.B) { run(b, "one", 30) })
	b.Run("fleet", func(b *testing.B) { run(b, "claims", n) })
}

// apiServerMetrics reads the API server's metrics endpoint.
func apiServerMetrics(b *testing.B, cs kubernetes.Interface) map[string]float64 {
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").Stream(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer body.Close()
	m, err := parseMetrics(body)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// apiServerDelta adds the growth between two scrapes of one metric's
// series whose labels contain every one of the given texts.
func apiServerDelta(before, after map[string]float64, name string, labels ...string) float64 {
	total := 0.0
	for k, v := range after {
		if !strings.HasPrefix(k, name+"{") {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(k, l)
		}
		if match {
			total += v - before[k]
		}
	}
	return total
}
