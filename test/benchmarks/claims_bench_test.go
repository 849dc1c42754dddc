//go:build e2e

package benchmarks

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
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
// time the creates took, the time from the first create until all are
// bound and from the last, claims bound a minute, each claim's create →
// bound (median, worst), the API server's claim PUTs over the run (count,
// mean latency, conflicts) and its volume writes, read from its metrics.
// The manager runs but has nothing to do. SCALE_CLAIMS_MINUTES (default
// 30) bounds the wait; SCALE_KCM_QPS sets kube-controller-manager's
// request limit (cluster.DefaultControllerManagerQPS; Kubernetes' is
// 20). Set against the fleet runs in docs/scale.md, it says how much of
// the fleet's come-up is the binder's own pace and how much the load of
// the pods around it.
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
		first := time.Now()
		created := createClaims(b, cs, prefix, count)
		createdIn := time.Since(first)
		logf(b, "created %d claims in %s", count, createdIn.Round(time.Millisecond))
		bound := map[string]time.Duration{}
		limit := time.Duration(envInt("SCALE_CLAIMS_MINUTES", 30)) * time.Minute
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
		delta := func(name string, labels ...string) float64 {
			return sumSeries(after, name, labels...) - sumSeries(before, name, labels...)
		}
		claims, volumes := `resource="persistentvolumeclaims"`, `resource="persistentvolumes"`
		puts := delta("apiserver_request_total", claims, `verb="PUT"`)
		putSeconds := delta("apiserver_request_duration_seconds_sum", claims, `verb="PUT"`)
		conflicts := delta("apiserver_request_total", claims, `code="409"`)
		volumeWrites := delta("apiserver_request_total", volumes, `verb="PUT"`) + delta("apiserver_request_total", volumes, `verb="POST"`)
		b.ReportMetric(createdIn.Seconds(), "created_s")
		b.ReportMetric(all.Seconds(), "all_bound_s")
		b.ReportMetric((all - createdIn).Seconds(), "bound_after_last_create_s")
		b.ReportMetric(float64(count)/all.Minutes(), "claims_bound_per_min")
		b.ReportMetric(each[len(each)/2].Seconds(), "bound_p50_s")
		b.ReportMetric(each[len(each)-1].Seconds(), "bound_max_s")
		b.ReportMetric(puts, "claim_puts")
		b.ReportMetric(conflicts, "claim_conflicts")
		b.ReportMetric(volumeWrites, "volume_writes")
		if puts > 0 {
			b.ReportMetric(putSeconds/puts, "claim_put_mean_s")
		}
		logf(b, "%d claims created in %s, all bound %s after the first create (%.1f a minute), %s after the last; create → bound p50 %s, max %s; %.0f claim PUTs at %.3f s, %.0f conflicts; %.0f volume writes (POST, PUT); load %.1f",
			count, createdIn.Round(time.Second), all.Round(time.Second), float64(count)/all.Minutes(), (all - createdIn).Round(time.Second),
			each[len(each)/2].Round(time.Millisecond), each[len(each)-1].Round(time.Millisecond),
			puts, putSeconds/max(puts, 1), conflicts, volumeWrites, loadAverage())
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

// createClaims creates count claims, three a namespace named after prefix
// (data-cache-0..2, as a CacheCluster's StatefulSet names them), each on
// the node the scheduler would have picked, 16 namespaces at a time: at
// one at a time the creates, not the binder, set the pace. It returns
// when each claim was created.
func createClaims(b *testing.B, cs kubernetes.Interface, prefix string, count int) map[string]time.Time {
	ctx := context.Background()
	nodes := []string{"node-a", "node-b", "node-c"}
	var (
		mu      sync.Mutex
		created = map[string]time.Time{}
		failed  error
		wg      sync.WaitGroup
	)
	slots := make(chan struct{}, 16)
	for first := 0; first < count; first += 3 {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			times, err := createNamespaceClaims(ctx, cs, prefix, first, count, nodes)
			mu.Lock()
			defer mu.Unlock()
			failed = cmp.Or(failed, err)
			maps.Copy(created, times)
		})
	}
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	return created
}

// createNamespaceClaims creates the namespace of claim first (and the
// two after it, up to count) and those claims; it returns when each was
// created.
func createNamespaceClaims(ctx context.Context, cs kubernetes.Interface, prefix string, first, count int, nodes []string) (map[string]time.Time, error) {
	ns := fmt.Sprintf("%s-%03d", prefix, first/3)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	created := map[string]time.Time{}
	for i := first; i < min(first+3, count); i++ {
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
			return created, err
		}
		created[ns+"/"+pvc.Name] = time.Now()
	}
	return created, nil
}
