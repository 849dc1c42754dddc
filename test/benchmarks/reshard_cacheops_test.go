//go:build e2e

package benchmarks

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// reshardCacheops is BenchmarkReshard's cacheops side: the manager on
// the process-backed cluster, spec.shards 3 → 4 → 3.
func reshardCacheops(b *testing.B, n int) {
	ctx := context.Background()
	e := startScaleEnv(b, 1, false)
	defer func() {
		e.stopManager()
		e.c.Stop()
		_ = e.managerLog.Close()
		if log, err := os.ReadFile(e.managerLog.Name()); err == nil {
			benchLog(b, "reshard-manager.log", log)
		}
		if !b.Failed() {
			_ = os.RemoveAll(e.dir)
		}
	}()
	const ns, name = "bench-reshard", "rs"
	if err := e.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	cc := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: reshardSpec()}
	if err := e.k8s.Create(ctx, cc); err != nil {
		b.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cc)
	waitEven(b, e.k8s, key, 3, 6, 5*time.Minute)
	secret := &corev1.Secret{}
	if err := e.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-auth"}, secret); err != nil {
		b.Fatal(err)
	}
	password := string(secret.Data["password"])
	pods := &podAddrs{k8s: e.k8s, ns: ns, cluster: name}
	var masters []string
	for i := range 3 {
		masters = append(masters, pods.addr(b, fmt.Sprintf("%s-%d", name, 2*i)))
	}
	preload(b, masters, password, n)
	keys := make([]int64, cachev1alpha1.SlotCount)
	for i, m := range masters {
		slotKeys(b, m, password, []probe.SlotRange{plan.EvenSlots(i, 3)}, keys)
	}
	observer := pods.addr(b, name+"-0")
	watch := func() ([]string, string) { return pods.all(), observer }

	for _, step := range []struct {
		prefix   string
		from, to int
	}{{"up", 3, 4}, {"down", 4, 3}} {
		w := watchMoves(b, password, watch)
		cpu0 := e.cpuSeconds()
		profile := startProfile(b, e, "reshard-"+step.prefix)
		start := time.Now()
		setShardCount(b, e.k8s, key, step.to)
		waitEven(b, e.k8s, key, step.to, 2*step.to, 10*time.Minute)
		total := time.Since(start)
		move := w.end(b)
		profile()
		slots, moved := 0, int64(0)
		for s, k := range keys {
			if plan.TargetShard(s, step.from) != plan.TargetShard(s, step.to) {
				slots++
				moved += k
			}
		}
		var now []string
		for i := range step.to {
			now = append(now, pods.addr(b, fmt.Sprintf("%s-%d", name, 2*i)))
		}
		checkMasterKeys(b, now, password, n)
		reportMove(b, step.prefix, slots, moved, move, total)
		b.ReportMetric(e.cpuSeconds()-cpu0, step.prefix+"_manager_cpu_s")
	}
}

// waitEven waits until the cluster serves the even layout of shards with
// no operation left, every slot served, and exactly pods pods.
func waitEven(b *testing.B, k8s client.Client, key client.ObjectKey, shards, pods int, limit time.Duration) {
	ctx := context.Background()
	last := ""
	ok := func() bool {
		cc := &cachev1alpha1.CacheCluster{}
		if err := k8s.Get(ctx, key, cc); err != nil {
			last = err.Error()
			return false
		}
		if cc.Status.Operation != nil || !meta.IsStatusConditionTrue(cc.Status.Conditions, cachev1alpha1.ConditionShardsReady) || len(cc.Status.Shards) != shards {
			last = fmt.Sprintf("operation %v, %d shards", cc.Status.Operation != nil, len(cc.Status.Shards))
			return false
		}
		for i, sh := range cc.Status.Shards {
			if len(sh.Slots) != 1 || sh.Slots[0] != plan.EvenSlots(i, shards).String() || sh.Master == "" || len(sh.Replicas) != pods/shards-1 {
				last = fmt.Sprintf("shard %d: %+v", i, sh)
				return false
			}
		}
		list := &corev1.PodList{}
		if err := k8s.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{cachev1alpha1.LabelCluster: key.Name}); err != nil || len(list.Items) != pods {
			last = fmt.Sprintf("%d pods", len(list.Items))
			return false
		}
		return true
	}
	for deadline := time.Now().Add(limit); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%s does not serve the even layout of %d shards within %s; last: %s", key, shards, limit, last)
		}
	}
}

func setShardCount(b *testing.B, k8s client.Client, key client.ObjectKey, n int) {
	cc := &cachev1alpha1.CacheCluster{}
	if err := k8s.Get(context.Background(), key, cc); err != nil {
		b.Fatal(err)
	}
	patch := client.MergeFrom(cc.DeepCopy())
	cc.Spec.Shards = ptr.To(int32(n))
	if err := k8s.Patch(context.Background(), cc, patch); err != nil {
		b.Fatal(err)
	}
}

// checkMasterKeys: the masters hold n keys together.
func checkMasterKeys(b *testing.B, masters []string, password string, n int) {
	var total int64
	for _, m := range masters {
		c := redis.NewClient(&redis.Options{Addr: m, Password: password})
		total += c.DBSize(context.Background()).Val()
		_ = c.Close()
	}
	if total != int64(n) {
		b.Fatalf("the masters %v hold %d keys, want %d", masters, total, n)
	}
}

// podAddrs reads the addresses of a cluster's pods, at most once a second.
type podAddrs struct {
	k8s         client.Client
	ns, cluster string

	mu    sync.Mutex
	at    time.Time
	addrs map[string]string
}

func (p *podAddrs) refresh() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.at) < time.Second {
		return
	}
	list := &corev1.PodList{}
	if err := p.k8s.List(context.Background(), list, client.InNamespace(p.ns), client.MatchingLabels{cachev1alpha1.LabelCluster: p.cluster}); err != nil {
		return
	}
	p.addrs = map[string]string{}
	for _, pod := range list.Items {
		if pod.Status.PodIP != "" {
			p.addrs[pod.Name] = pod.Status.PodIP + ":6379"
		}
	}
	p.at = time.Now()
}

func (p *podAddrs) addr(b *testing.B, pod string) string {
	p.mu.Lock()
	p.at = time.Time{}
	p.mu.Unlock()
	p.refresh()
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.addrs[pod]
	if !ok {
		b.Fatalf("pod %s has no address", pod)
	}
	return a
}

func (p *podAddrs) all() []string {
	p.refresh()
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, a := range p.addrs {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// startProfile takes a CPU profile of the manager while a move runs, when
// RESHARD_PROFILE is set, into bench/<name>-manager-cpu.pprof; the
// returned function waits for it.
func startProfile(b *testing.B, e *scaleEnv, name string) func() {
	secs, _ := strconv.Atoi(os.Getenv("RESHARD_PROFILE"))
	if secs <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", e.pprofAd, secs))
		if err != nil {
			b.Log(err)
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil || !strings.HasPrefix(resp.Status, "200") {
			b.Logf("profile: %v %s", err, resp.Status)
			return
		}
		if err := os.MkdirAll(benchDir(), 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(benchDir(), name+"-manager-cpu.pprof"), data, 0o644)
		}
	}()
	return func() { <-done }
}
