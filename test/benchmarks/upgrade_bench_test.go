//go:build e2e

package benchmarks

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/test/cluster"
)

// BenchmarkUpgrade measures a 3-pod rolling restart under a client that
// writes continuously (SET, then WAIT 1, through the client Service's
// endpoint): how long it takes and the longest time no write was
// acknowledged. "baseline" restarts the pods as a StatefulSet's
// RollingUpdate would — highest ordinal first, each once the previous one
// is back, the master in place (automatic failover off, so nothing moves
// the role); "cacheops" migrates redis 7.0.15 to valkey 8.0.1 (spec.engine
// and spec.version) and lets day-two roll it: pre-check, replicas first,
// a switchover, the old master last. Each
// iteration is one rollout on a new cluster; run with -benchtime 3x.
func BenchmarkUpgrade(b *testing.B) {
	root := repoRoot()
	c, k8s, stop := startOperatorCluster(b, root, filepath.Join(root, "bin"))
	defer stop()
	for _, v := range []struct {
		name, prefix string
		cacheops     bool
	}{{"baseline", "bench-restart", false}, {"cacheops", "bench-upgrade", true}} {
		b.Run(v.name, func(b *testing.B) {
			b.StopTimer()
			var took, pauses []time.Duration
			for i := 0; i < b.N; i++ {
				d, p := upgradeRun(b, c, k8s, fmt.Sprintf("%s-%d", v.prefix, nextRun()), v.cacheops)
				took, pauses = append(took, d), append(pauses, p)
			}
			reportUpgrade(b, took, pauses)
		})
	}
}

// runs numbers the namespaces: the testing package calls a benchmark's
// function more than once (b.N = 1 first).
var runs int

func nextRun() int { runs++; return runs }

func reportUpgrade(b *testing.B, took, pauses []time.Duration) {
	rollout, _ := quantiles(took)
	p50, worst := quantiles(pauses)
	b.ReportMetric(rollout.Seconds(), "rollout_s")
	b.ReportMetric(p50.Seconds(), "write_pause_p50_s")
	b.ReportMetric(worst.Seconds(), "write_pause_max_s")
}

// upgradeRun creates a 3-pod cluster, starts the writer, rolls the pods and
// returns the rollout's duration and the longest write pause during it.
func upgradeRun(b *testing.B, c *cluster.Cluster, k8s client.Client, ns string, cacheops bool) (time.Duration, time.Duration) {
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	three, off := int32(3), false
	cc := &cachev1alpha1.CacheCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "up", Namespace: ns},
		Spec: cachev1alpha1.CacheClusterSpec{Version: "7.0.15", Replicas: &three,
			HighAvailability: cachev1alpha1.HighAvailabilitySpec{ProbeTimeoutSeconds: int32(detection.Seconds())}},
	}
	if !cacheops {
		cc.Spec.HighAvailability.AutoFailover = &off
	}
	if err := k8s.Create(ctx, cc); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, cc) }()
	master := waitReplicas(b, k8s, cc, 3)
	secret := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "up-auth"}, secret); err != nil {
		b.Fatal(err)
	}
	w := startBenchWriter(k8s, ns, "up", string(secret.Data["password"]))
	defer w.stop()
	if !w.waitAcks(100, 30*time.Second) {
		b.Fatal("the writer got no acknowledged writes")
	}

	start := time.Now()
	if cacheops {
		// The migration redis 7.0.15 → valkey 8.0.1: real binaries.
		patch := []byte(`{"spec":{"engine":"valkey","version":"8.0.1"}}`)
		if err := k8s.Patch(ctx, cc.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
			b.Fatal(err)
		}
		waitUpgraded(b, k8s, cc)
	} else {
		order := []string{"up-2", "up-1", "up-0"}
		for _, p := range order {
			if err := k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p}}); err != nil {
				b.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond)
			if waitReplicas(b, k8s, cc, 3) != master {
				b.Fatal("the master moved although automatic failover is off")
			}
		}
	}
	took := time.Since(start)
	if !w.waitAcks(w.count()+20, 30*time.Second) {
		b.Fatal("writes did not resume")
	}
	return took, w.longestPause(start, time.Now())
}

// waitReplicas waits for a Running cluster whose pods all carry a role
// label and returns the master.
func waitReplicas(b *testing.B, k8s client.Client, cc *cachev1alpha1.CacheCluster, n int) string {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if master, ok := replicated(k8s, cc, n); ok {
			return master
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatal("cluster did not replicate within 3 minutes")
	return ""
}

// replicated says whether the CacheCluster is Running and Ready with n
// pods, each labelled and ready, and returns its master.
func replicated(k8s client.Client, cc *cachev1alpha1.CacheCluster, n int) (string, bool) {
	got := &cachev1alpha1.CacheCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), got); err != nil || got.Status.Phase != cachev1alpha1.PhaseRunning ||
		!meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionReady) || got.Status.CurrentMaster == "" || len(got.Status.Nodes) != n {
		return "", false
	}
	for _, node := range got.Status.Nodes {
		if node.Role == "" || !node.Ready {
			return "", false
		}
	}
	return got.Status.CurrentMaster, true
}

// waitUpgraded waits for the Upgrade's OperationCompleted Event.
func waitUpgraded(b *testing.B, k8s client.Client, cc *cachev1alpha1.CacheCluster) {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		events := &corev1.EventList{}
		if err := k8s.List(context.Background(), events, client.InNamespace(cc.Namespace)); err == nil {
			for _, e := range events.Items {
				if e.Reason == cachev1alpha1.EventOperationDone && strings.HasPrefix(e.Message, "Upgrade") {
					return
				}
				if e.Reason == cachev1alpha1.EventRolledBack || e.Reason == cachev1alpha1.EventPrecheckFailed {
					b.Fatalf("upgrade failed: %s", e.Message)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatal("upgrade did not complete within 5 minutes")
}

// benchWriter writes continuously through the client Service and records
// when each write was acknowledged by a replica.
type benchWriter struct {
	mu   sync.Mutex
	acks []time.Time
	quit chan struct{}
	done chan struct{}
}

func startBenchWriter(k8s client.Client, ns, service, password string) *benchWriter {
	w := &benchWriter{quit: make(chan struct{}), done: make(chan struct{})}
	sc := &serviceClient{k8s: k8s, ns: ns, service: service, password: password}
	go func() {
		defer close(w.done)
		defer sc.Close()
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-w.quit:
				return
			default:
			}
			if tryWrite(ctx, sc, i) {
				w.mu.Lock()
				w.acks = append(w.acks, time.Now())
				w.mu.Unlock()
				continue
			}
			sc.lastResolved = time.Time{}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return w
}

func (w *benchWriter) stop() { close(w.quit); <-w.done }

func (w *benchWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acks)
}

func (w *benchWriter) waitAcks(n int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if w.count() >= n {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func (w *benchWriter) longestPause(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var longest time.Duration
	prev := from
	for _, t := range w.acks {
		if t.Before(from) || t.After(to) {
			continue
		}
		longest = max(longest, t.Sub(prev))
		prev = t
	}
	return longest
}
