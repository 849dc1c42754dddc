//go:build e2e

package benchmarks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// BenchmarkScale runs one manager against many CacheClusters of real
// redis-server pods (3 each, maxmemory 8mb, probeTimeoutSeconds 5 or
// SCALE_PROBE_TIMEOUT) on the process-backed cluster. "baseline" is a lone
// cluster; "fleet" is SCALE_CLUSTERS of them (default 300) on the same
// control plane and the same manager, measured right after. For each: the
// time to Ready (fleet: all of them, from the first create), the manager's
// RSS and CPU in steady state, its API requests per minute in steady state
// split into reads and writes, and the failover time of one cluster's
// master (kill → first write a replica acknowledged) over SCALE_FAILOVERS
// failovers (default 20). The fleet also reports the manager's peak RSS
// and the time to settle after a restart of the manager (every cluster
// reconciled again by both controllers and both queues empty), and leaves
// CPU and heap profiles of the manager in steady state in
// bench/scale-*.pprof with their top items in bench/scale-*-top.txt. Run
// with -benchtime 1x.
func BenchmarkScale(b *testing.B) {
	n := envInt("SCALE_CLUSTERS", 300)
	failovers := envInt("SCALE_FAILOVERS", 20)
	steady := time.Duration(envInt("SCALE_STEADY_SECONDS", 60)) * time.Second
	env := startScaleEnv(b, n, false)
	defer env.stop(b)
	logf(b, "every cluster with probeTimeoutSeconds %d", scaleProbeTimeout)

	b.Run("baseline", func(b *testing.B) {
		b.StopTimer()
		t0 := time.Now()
		cc := env.create(b, "lone", "fo")
		waitReplicas(b, env.k8s, cc, 3)
		b.ReportMetric(time.Since(t0).Seconds(), "ready_s")
		env.settle(b)
		env.reportSteady(b, steady)
		env.reportFailovers(b, cc, failovers)
		// The fleet is measured without it.
		_ = env.k8s.Delete(context.Background(), cc)
	})

	b.Run("fleet", func(b *testing.B) {
		b.StopTimer()
		t0 := time.Now()
		var all []*cachev1alpha1.CacheCluster
		start := env.scrape(b)
		for i := 0; i < n; i++ {
			all = append(all, env.create(b, fmt.Sprintf("team-%03d", i), "fo"))
		}
		logf(b, "created %d CacheClusters in %s", n, time.Since(t0).Round(time.Millisecond))
		limit := time.Duration(envInt("SCALE_READY_MINUTES", 10)) * time.Minute
		if ready := env.waitAllReady(b, n, limit); ready < n {
			// Measured all the same: what a fleet that never settles
			// costs is a figure too.
			logf(b, "only %d of %d CacheClusters were Ready at once within %s", ready, n, limit)
			b.ReportMetric(float64(ready), "most_ready_at_once")
		} else {
			b.ReportMetric(time.Since(t0).Seconds(), "ready_s")
			logf(b, "all %d CacheClusters Ready %s after the first create", n, time.Since(t0).Round(time.Second))
		}
		b.ReportMetric(float64(n), "clusters")
		env.settle(b)
		env.reportSteady(b, steady)
		env.profile(b, "fleet")
		// The first cluster that is Ready now: in a fleet that did not
		// all become Ready, the one killed is one that was.
		victim := env.firstReady(b, all)
		env.reportFailovers(b, victim, failovers)
		// Failovers the benchmark did not ask for: a healthy master
		// taken for a dead one.
		// The lone cluster's series are counted in neither scrape: they
		// are dropped when it is deleted, which may come after start was
		// scraped (run 32 reported -20, its 20 kills).
		killed := `namespace="` + victim.Namespace + `"`
		end := env.scrape(b)
		grew := func(name string, labels ...string) float64 {
			return sumSeries(end, name, labels...) - sumSeries(end, name, append(labels, `namespace="lone"`)...) -
				(sumSeries(start, name, labels...) - sumSeries(start, name, append(labels, `namespace="lone"`)...))
		}
		b.ReportMetric(grew("cacheops_failovers_total")-grew("cacheops_failovers_total", killed), "other_failovers")
		// Masters that missed their probes past the timeout but answered
		// the last look before a failover (slow, not dead).
		b.ReportMetric(grew("cacheops_failovers_averted_total"), "averted_failovers")
		// Day-two status writes refused for a conflict, from the first
		// create to now, and by step in the log.
		conflicts := sumSeries(end, "cacheops_daytwo_status_conflicts_total", "") - sumSeries(start, "cacheops_daytwo_status_conflicts_total", "")
		b.ReportMetric(conflicts, "status_conflicts")
		logf(b, "%.0f day-two status writes refused for a conflict in %s: %s", conflicts, time.Since(t0).Round(time.Second), seriesDelta(start, end, "cacheops_daytwo_status_conflicts_total"))
		b.ReportMetric(env.peakRSS(), "peak_rss_MiB")
		b.ReportMetric(env.restartSettle(b, n).Seconds(), "restart_settle_s")
		// The restarted manager counts from zero.
		b.ReportMetric(sumSeries(env.scrape(b), "cacheops_failovers_total", ""), "restart_failovers")
	})
}

// BenchmarkScaleControlPlane runs the manager against SCALE_CP_CLUSTERS
// CacheClusters (default 1000) on the control plane alone: the objects
// are rendered and applied, no pod ever runs. "baseline" is one cluster.
// It reports the manager's RSS (and peak) and CPU once the queues are
// empty, its API requests per minute then, and the reconcile latency: from
// a CacheCluster's create to day-one's first status (observedGeneration),
// read every second, median and worst.
func BenchmarkScaleControlPlane(b *testing.B) {
	n := envInt("SCALE_CP_CLUSTERS", 1000)
	steady := time.Duration(envInt("SCALE_STEADY_SECONDS", 60)) * time.Second
	env := startScaleEnv(b, n, true)
	defer env.stop(b)
	run := func(b *testing.B, prefix string, count int) {
		b.StopTimer()
		created := map[string]time.Time{}
		first := time.Now()
		for i := 0; i < count; i++ {
			cc := env.create(b, fmt.Sprintf("%s-%04d", prefix, i), "cp")
			created[cc.Namespace] = time.Now()
		}
		lat := env.waitObserved(b, created, 15*time.Minute)
		p50, worst := quantiles(lat)
		b.ReportMetric(p50.Seconds(), "reconcile_latency_p50_s")
		b.ReportMetric(worst.Seconds(), "reconcile_latency_max_s")
		// kube-controller-manager creates the pods (never scheduled)
		// long after day-one's first status, each one a status change
		// the manager reports: the steady state starts once they all
		// exist.
		b.ReportMetric(env.waitPodsCreated(b, first, 30*time.Minute).Seconds(), "pods_created_s")
		env.settle(b)
		env.reportSteady(b, steady)
		b.ReportMetric(env.peakRSS(), "peak_rss_MiB")
	}
	b.Run("baseline", func(b *testing.B) { run(b, "one", 1) })
	b.Run("thousand", func(b *testing.B) {
		run(b, "cp", n)
		env.profile(b, "controlplane")
	})
}

// waitObserved waits until every CacheCluster created (by namespace, at
// the time given) carries day-one's status for its generation and
// returns each one's latency.
func (e *scaleEnv) waitObserved(b *testing.B, created map[string]time.Time, limit time.Duration) []time.Duration {
	deadline := time.Now().Add(limit)
	seen := map[string]time.Duration{}
	for time.Now().Before(deadline) {
		list := &cachev1alpha1.CacheClusterList{}
		if err := e.k8s.List(context.Background(), list); err == nil {
			now := time.Now()
			for _, cc := range list.Items {
				t0, ok := created[cc.Namespace]
				if _, done := seen[cc.Namespace]; ok && !done && cc.Status.ObservedGeneration == cc.Generation {
					seen[cc.Namespace] = now.Sub(t0)
				}
			}
		}
		if len(seen) == len(created) {
			var out []time.Duration
			for _, d := range seen {
				out = append(out, d)
			}
			return out
		}
		time.Sleep(time.Second)
	}
	b.Fatalf("%d of %d CacheClusters reconciled within %s", len(seen), len(created), limit)
	return nil
}

// waitPodsCreated waits until every StatefulSet of a CacheCluster has
// all its pods (created, not necessarily running) and returns the time
// since t0.
func (e *scaleEnv) waitPodsCreated(b *testing.B, t0 time.Time, limit time.Duration) time.Duration {
	ctx := context.Background()
	deadline := time.Now().Add(limit)
	missing := -1
	for time.Now().Before(deadline) {
		ccs := &cachev1alpha1.CacheClusterList{}
		sets := &appsv1.StatefulSetList{}
		if e.k8s.List(ctx, ccs) == nil && e.k8s.List(ctx, sets, client.MatchingLabels{cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue}) == nil {
			missing = 0
			for _, cc := range ccs.Items {
				want := int32(3)
				if cc.Spec.Replicas != nil {
					want = *cc.Spec.Replicas
				}
				missing += int(want)
			}
			for _, s := range sets.Items {
				missing -= int(min(s.Status.Replicas, ptr.Deref(s.Spec.Replicas, 1)))
			}
			if missing <= 0 {
				return time.Since(t0)
			}
		}
		time.Sleep(5 * time.Second)
	}
	b.Fatalf("%d pods not created within %s", missing, limit)
	return 0
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// redisHz is the benchmark's redis-servers' hz (SCALE_REDIS_HZ, default
// 1). At Redis's default of 10 an idle server with the operator's probe
// took 0.19 % of a core in the fleet (serverCron ten times a second, each
// reading /proc for its memory figures): about 1.7 of the two cores for
// 900, before the operator or the control plane had any, and the
// machine, not the operator, set every figure (docs/scale.md). At 1 it
// took 0.09 %. The lone cluster runs the same pods, so the ratios
// compare like with like; hz changes Redis's own timers (expiry, client
// timeouts, noticing a finished BGSAVE), not the operator's probes.
var redisHz = envInt("SCALE_REDIS_HZ", 1)

// retainClaims sets storage.retainOnDelete on the benchmark's clusters
// (SCALE_RETAIN_CLAIMS=1): their StatefulSets keep their claims
// (persistentVolumeClaimRetentionPolicy Retain), so kube-controller-manager
// never writes owner references to a new claim while the scheduler writes
// its selected node to it. It tells how much of the fleet's come-up those
// conflicting writes cost.
var retainClaims = envInt("SCALE_RETAIN_CLAIMS", 0) == 1

// scaleProbeTimeout is the benchmark's clusters' probeTimeoutSeconds
// (SCALE_PROBE_TIMEOUT, default 5: what a manifest that does not set it
// gets). The lone cluster gets the same, so the ratios compare like with
// like. Runs 1–31 in docs/scale.md ran at 1 (BenchmarkFailover's
// detection): SCALE_PROBE_TIMEOUT=1 measures as they did.
var scaleProbeTimeout = int32(envInt("SCALE_PROBE_TIMEOUT", 5))

// create makes a namespace and a small CacheCluster in it.
func (e *scaleEnv) create(b *testing.B, ns, name string) *cachev1alpha1.CacheCluster {
	ctx := context.Background()
	if err := e.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	three := int32(3)
	cc := &cachev1alpha1.CacheCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: cachev1alpha1.CacheClusterSpec{Version: "7.0.15", Replicas: &three,
			Config:           map[string]cachev1alpha1.ConfigValue{"maxmemory": "8mb", "hz": cachev1alpha1.ConfigValue(strconv.Itoa(redisHz))},
			HighAvailability: cachev1alpha1.HighAvailabilitySpec{ProbeTimeoutSeconds: scaleProbeTimeout},
			Storage:          cachev1alpha1.StorageSpec{RetainOnDelete: retainClaims}},
	}
	if err := e.k8s.Create(ctx, cc); err != nil {
		b.Fatal(err)
	}
	return cc
}

// waitAllReady waits until n CacheClusters are Running and Ready at once,
// for at most limit, and returns the most that were.
func (e *scaleEnv) waitAllReady(b *testing.B, n int, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	last, most := -1, 0
	for time.Now().Before(deadline) {
		list := &cachev1alpha1.CacheClusterList{}
		if err := e.k8s.List(context.Background(), list); err == nil {
			ready := 0
			for _, cc := range list.Items {
				if cc.Status.Phase == cachev1alpha1.PhaseRunning && meta.IsStatusConditionTrue(cc.Status.Conditions, cachev1alpha1.ConditionReady) {
					ready++
				}
			}
			most = max(most, ready)
			if ready >= n {
				return ready
			}
			if ready/25 != last/25 {
				logf(b, "%d of %d Ready", ready, n)
				last = ready
			}
		}
		time.Sleep(time.Second)
	}
	return most
}

// firstReady returns the first of the clusters that is Running and
// Ready, or the first one if none is.
func (e *scaleEnv) firstReady(b *testing.B, all []*cachev1alpha1.CacheCluster) *cachev1alpha1.CacheCluster {
	for _, cc := range all {
		cur := &cachev1alpha1.CacheCluster{}
		if err := e.k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), cur); err != nil {
			continue
		}
		if cur.Status.Phase == cachev1alpha1.PhaseRunning && meta.IsStatusConditionTrue(cur.Status.Conditions, cachev1alpha1.ConditionReady) {
			if cur.Namespace != all[0].Namespace {
				logf(b, "%s is not Ready: failing over %s instead", all[0].Namespace, cur.Namespace)
			}
			return cc
		}
	}
	logf(b, "no cluster is Ready: failing over %s", all[0].Namespace)
	return all[0]
}

// reportFailovers kills the cluster's master k times, waiting for a full
// set of linked replicas between two kills, and reports the median and
// worst time from the kill to the first acknowledged write. A cluster
// that does not recover within 3 minutes ends the kills, not the
// benchmark: failovers_measured says how many there were.
func (e *scaleEnv) reportFailovers(b *testing.B, cc *cachev1alpha1.CacheCluster, k int) {
	ctx := context.Background()
	secret := &corev1.Secret{}
	if err := e.k8s.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: cc.Name + "-auth"}, secret); err != nil {
		b.Fatal(err)
	}
	sc := &serviceClient{k8s: e.k8s, ns: cc.Namespace, service: cc.Name, password: string(secret.Data["password"])}
	defer sc.Close()
	var runs, labelled []time.Duration
	timeouts := 0
	// The failovers' own steps (recorded → completed, from the manager's
	// histogram): what the queue and the workers add shows here.
	steps := fmt.Sprintf(`namespace="%s"`, cc.Namespace)
	before := e.scrape(b)
	for i := 0; i < k; i++ {
		master, err := recovered(ctx, e.k8s, cc, sc, 3, 3*time.Minute)
		if err != nil {
			logf(b, "%s/%s before kill %d: %v: no more kills", cc.Namespace, cc.Name, i+1, err)
			break
		}
		if _, err := ackedWrite(ctx, sc, 30*time.Second); err != nil {
			logf(b, "%s/%s before kill %d: %v: no more kills", cc.Namespace, cc.Name, i+1, err)
			break
		}
		newMaster := e.watchNewMaster(ctx, b, cc, master)
		start := time.Now()
		if err := e.c.KillContainer(cc.Namespace, master, "redis"); err != nil {
			b.Fatal(err)
		}
		const limit = 60 * time.Second
		at, err := ackedWrite(ctx, sc, limit)
		if err != nil {
			// Counted at the limit, and reported: a figure, not a
			// crash of the benchmark.
			timeouts++
			at = start.Add(limit)
		}
		runs = append(runs, at.Sub(start))
		var lab time.Duration
		select {
		case t := <-newMaster:
			lab = t.Sub(start)
			labelled = append(labelled, lab)
		case <-time.After(5 * time.Second):
		}
		logf(b, "%s/%s failover %d: %s killed at %s: new master labelled after %s, write acknowledged after %s (%v)", cc.Namespace, cc.Name, i+1, master,
			start.UTC().Format("15:04:05.000"), lab.Round(time.Millisecond), at.Sub(start).Round(time.Millisecond), err)
	}
	b.ReportMetric(float64(len(runs)), "failovers_measured")
	if len(runs) == 0 {
		return
	}
	b.ReportMetric(float64(timeouts), "failovers_over_60s")
	after := e.scrape(b)
	if n := sumSeries(after, "cacheops_failover_duration_seconds_count", steps) - sumSeries(before, "cacheops_failover_duration_seconds_count", steps); n > 0 {
		sum := sumSeries(after, "cacheops_failover_duration_seconds_sum", steps) - sumSeries(before, "cacheops_failover_duration_seconds_sum", steps)
		b.ReportMetric(sum/n, "steps_mean_s")
		b.ReportMetric(n, "failovers_completed")
	}
	p50, worst := quantiles(runs)
	b.ReportMetric(p50.Seconds(), "failover_p50_s")
	b.ReportMetric(worst.Seconds(), "failover_max_s")
	if len(labelled) > 0 {
		// The operator's share: kill → another pod labelled master. The
		// rest is the Service's endpoints (kube-controller-manager) and
		// the client finding them.
		p50, _ := quantiles(labelled)
		b.ReportMetric(p50.Seconds(), "labelled_p50_s")
	}
}

// recovered waits until the cluster is replicated (status: n pods Ready
// and labelled) and its master, behind the Service, has n-1 replicas
// online. The status says nothing of the links: a replica can be Ready
// and labelled while it has not linked to the master of the last
// failover, and a kill then measures a second failover of a cluster that
// has not recovered from the first.
func recovered(ctx context.Context, k8s client.Client, cc *cachev1alpha1.CacheCluster, sc *serviceClient, n int, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	why := "not replicated"
	for time.Now().Before(deadline) {
		if master, ok := replicated(k8s, cc, n); !ok {
			why = "not replicated"
		} else if err := sc.resolve(ctx); err != nil {
			why = err.Error()
		} else if info, err := sc.Info(ctx, "replication").Result(); err != nil {
			why = "INFO replication: " + err.Error()
		} else if online := onlineReplicas(info); online < n-1 {
			why = fmt.Sprintf("%d of %d replicas online", online, n-1)
		} else {
			return master, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", fmt.Errorf("not recovered within %s: %s", limit, why)
}

// onlineReplicas counts the replicas INFO replication lists as online.
func onlineReplicas(info string) int {
	n := 0
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "slave") && strings.Contains(line, ",state=online,") {
			n++
		}
	}
	return n
}

// watchNewMaster watches the cluster's pods and sends the time it first
// sees a pod other than old labelled master.
func (e *scaleEnv) watchNewMaster(ctx context.Context, b *testing.B, cc *cachev1alpha1.CacheCluster, old string) <-chan time.Time {
	w, err := e.k8s.Watch(ctx, &corev1.PodList{}, client.InNamespace(cc.Namespace), client.MatchingLabels{cachev1alpha1.LabelCluster: cc.Name})
	if err != nil {
		b.Fatal(err)
	}
	out := make(chan time.Time, 1)
	go func() {
		defer w.Stop()
		timeout := time.After(70 * time.Second)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if p, isPod := ev.Object.(*corev1.Pod); isPod && p.Name != old && p.Labels[cachev1alpha1.LabelRole] == cachev1alpha1.RoleMaster {
					out <- time.Now()
					return
				}
			case <-timeout:
				return
			}
		}
	}()
	return out
}

// reportSteady measures the manager over a window of steady state: CPU
// (share of one core), RSS, and API requests per minute.
func (e *scaleEnv) reportSteady(b *testing.B, window time.Duration) {
	before := e.scrape(b)
	cpu0, t0 := e.cpuSeconds(), time.Now()
	time.Sleep(window)
	cpu1, elapsed := e.cpuSeconds(), time.Since(t0)
	after := e.scrape(b)
	reads, writes := requestDelta(before, after)
	minutes := elapsed.Minutes()
	b.ReportMetric(100*(cpu1-cpu0)/elapsed.Seconds(), "cpu_pct")
	b.ReportMetric(e.rss(), "rss_MiB")
	b.ReportMetric(reads/minutes, "reads_per_min")
	b.ReportMetric(writes/minutes, "writes_per_min")
	logf(b, "steady state over %s: %.1f%% of a core, %.1f MiB, %.0f reads and %.0f writes per minute",
		elapsed.Round(time.Second), 100*(cpu1-cpu0)/elapsed.Seconds(), e.rss(), reads/minutes, writes/minutes)
	// Reconciles per minute: a waiting cluster looked at every probe
	// period shows here, before it shows in CPU.
	for _, ctl := range []struct{ name, unit string }{{"cachecluster-dayone", "dayone"}, {"cachecluster-daytwo", "daytwo"}} {
		sel := `controller="` + ctl.name + `"`
		d := sumSeries(after, "controller_runtime_reconcile_total", sel) - sumSeries(before, "controller_runtime_reconcile_total", sel)
		b.ReportMetric(d/minutes, ctl.unit+"_reconciles_per_min")
	}
	// The machine around the manager: the pods, their probes and the
	// control plane share the two cores.
	b.ReportMetric(loadAverage(), "load_avg_1m")
	// What the writes were: one figure per verb and resource that had
	// any, so a regression names its source.
	for _, w := range writesByResource(before, after) {
		b.ReportMetric(w.count/minutes, "writes_per_min_"+w.verb+"_"+w.resource)
		logf(b, "  %s %s: %.1f per minute", w.verb, w.resource, w.count/minutes)
	}
	// And the reads, logged only: a watch that the API server ended
	// after its timeout is started again (a read), which is not work the
	// operator chose; a get is.
	for _, r := range requestsByResource(before, after, true) {
		logf(b, "  read: %s %s: %.0f in the window", r.verb, r.resource, r.count)
	}
}

// settle waits for both controllers' queues to hold nothing to do now,
// then for 10 s without a write (at most five minutes more: the control
// plane's own controllers may still be creating pods, each a change the
// manager reports), so the window measures the steady state and not the
// tail of the start.
func (e *scaleEnv) settle(b *testing.B) {
	t0 := time.Now()
	deadline := t0.Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		m := e.scrape(b)
		if sumSeries(m, "workqueue_depth", "") == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for quiet := time.Now().Add(5 * time.Minute); time.Now().Before(quiet); {
		before := e.scrape(b)
		time.Sleep(10 * time.Second)
		if len(writesByResource(before, e.scrape(b))) == 0 {
			logf(b, "settled %s after the measured phase", time.Since(t0).Round(time.Second))
			return
		}
	}
	logf(b, "the manager still writes five minutes after its queues emptied")
}

// restartSettle stops the manager, starts it again and returns how long
// it took until both controllers had reconciled every cluster and their
// queues were empty.
func (e *scaleEnv) restartSettle(b *testing.B, n int) time.Duration {
	e.stopManager()
	t0 := time.Now()
	e.startManager(b)
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		m, err := e.tryScrape()
		if err == nil {
			done := true
			for _, ctl := range []string{"cachecluster-dayone", "cachecluster-daytwo"} {
				if sumSeries(m, "controller_runtime_reconcile_total", `controller="`+ctl+`"`) < float64(n) ||
					sumSeries(m, "workqueue_depth", `name="`+ctl+`"`) > 0 {
					done = false
				}
			}
			if done {
				return time.Since(t0)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.Fatal("the restarted manager did not settle within 10 minutes")
	return 0
}

// benchDir is where profiles go, beside the JSON of make bench.
func benchDir() string { return filepath.Join(repoRoot(), "bench") }

// logf logs to the benchmark and, with the time and the benchmark's name,
// to stderr: Go keeps only the first 10 lines of a benchmark's log, and a
// fleet run's Ready counts alone are more (fleet run 8 lost its failover
// and steady-state lines so).
func logf(b *testing.B, format string, args ...any) {
	b.Helper()
	msg := fmt.Sprintf(format, args...)
	b.Log(msg)
	fmt.Fprintf(os.Stderr, "%s %s: %s\n", time.Now().UTC().Format("15:04:05.000"), b.Name(), msg)
}
