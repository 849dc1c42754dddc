package daytwo_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/access"
	"github.com/cacheops/cacheops/dayTwo/backup"
	"github.com/cacheops/cacheops/renderer"
)

// rollouts plays, for a rolling restart, what day-one, the StatefulSet
// controller and the kubelet do: the StatefulSet's template follows
// status.rollout (one revision per template, the same one when a
// template comes back); a deleted pod's server stops (SIGTERM) and starts
// again on its data folder with the engine of the current template, and
// its pod is made again on the current revision; the pre-check pod runs:
// its seed copies its source's data with backup.Seed (what `manager
// precheck-seed` runs) and a server of its image starts on the copy in
// cluster mode, on an empty node file.
type rollouts struct {
	c      *cluster
	subnet int

	mu sync.Mutex
	// revs is the revision of each template rendered, by template key;
	// key, rev and engine are the current template's.
	revs     map[string]string
	key, rev string
	engine   cachev1alpha1.Engine
	restarts []string
	precheck *redisProc
}

func (c *cluster) playRollouts(subnet int) *rollouts {
	r := &rollouts{c: c, subnet: subnet, revs: map[string]string{}, rev: revision}
	c.watch(&cachev1alpha1.CacheClusterList{}, func(typ watch.EventType, o client.Object) {
		if cc, ok := o.(*cachev1alpha1.CacheCluster); ok && typ != watch.Deleted && cc.Name == c.name && cc.Status.Rollout != nil {
			if err := r.render(cc.Status.Rollout.RolloutValues); err != nil {
				c.t.Errorf("rendering the StatefulSet: %v", err)
			}
		}
	})
	c.watch(&corev1.PodList{}, func(typ watch.EventType, o client.Object) {
		p, ok := o.(*corev1.Pod)
		if !ok {
			return
		}
		var err error
		switch {
		case p.Name == renderer.PrecheckName(&cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Name: c.name}}):
			err = r.runPrecheck(typ, p)
		case typ == watch.Deleted && c.ips[p.Name] != "":
			err = r.restart(p.Name)
		}
		if err != nil {
			c.t.Errorf("%s: %v", p.Name, err)
		}
	})
	return r
}

// render gives the StatefulSet the template of v (its image, engine,
// version, restart-only parameters and resources, which make
// renderer.TemplateKey) and the revision of that template.
func (r *rollouts) render(v cachev1alpha1.RolloutValues) error {
	key := renderer.TemplateKey(v)
	r.mu.Lock()
	if key == r.key {
		r.mu.Unlock()
		return nil
	}
	rev, seen := r.revs[key]
	if !seen {
		rev = "cache-" + key[:10]
		if len(r.revs) == 0 {
			rev = revision // the pods' template at first
		}
		r.revs[key] = rev
	}
	r.key, r.rev, r.engine = key, rev, cachev1alpha1.EngineOrDefault(v.Engine)
	r.mu.Unlock()
	ctx := context.Background()
	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: r.c.ns, Name: r.c.name}, sts); err != nil {
		return err
	}
	t := &sts.Spec.Template
	t.Annotations = map[string]string{
		cachev1alpha1.AnnotationEngine: string(cachev1alpha1.EngineOrDefault(v.Engine)), cachev1alpha1.AnnotationVersion: v.Version,
		cachev1alpha1.AnnotationRestartConfig: renderer.RestartConfigHash(v.Config),
	}
	t.Spec.Containers[0].Image, t.Spec.Containers[0].Resources = renderer.ImageOf(v), v.Resources
	if err := k8s.Update(ctx, sts); err != nil {
		return err
	}
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: *sts.Spec.Replicas, ReadyReplicas: *sts.Spec.Replicas,
		CurrentRevision: rev, UpdateRevision: rev}
	return k8s.Status().Update(ctx, sts)
}

func serverOf(engine cachev1alpha1.Engine) string {
	if engine == cachev1alpha1.EngineValkey {
		return "valkey-server"
	}
	return "redis-server"
}

// restart stops a deleted pod's server and starts it again on its data
// with the current template's engine, in a pod of the current revision.
func (r *rollouts) restart(name string) error {
	r.mu.Lock()
	rev, engine := r.rev, r.engine
	r.restarts = append(r.restarts, name)
	r.mu.Unlock()
	proc := r.c.redis[name]
	proc.stop()
	proc.bin = serverOf(engine)
	if err := proc.run(); err != nil {
		return err
	}
	return r.c.createPodAt(name, rev)
}

// restarted are the pods restarted so far, in order.
func (r *rollouts) restarted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.restarts...)
}

// runPrecheck starts the pre-check pod's server on a copy of its seed's
// source, once, and stops it when the pod goes.
func (r *rollouts) runPrecheck(typ watch.EventType, p *corev1.Pod) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if typ == watch.Deleted {
		if r.precheck != nil {
			r.precheck.kill()
			r.precheck = nil
		}
		return nil
	}
	if r.precheck != nil || p.Status.PodIP != "" {
		return nil
	}
	var from string
	for _, ic := range p.Spec.InitContainers {
		for _, a := range ic.Args {
			if v, ok := strings.CutPrefix(a, "--from="); ok && ic.Name == renderer.SeedContainerName {
				from = v
			}
		}
	}
	if from == "" {
		return fmt.Errorf("the pre-check pod has no seed init container")
	}
	ip := fmt.Sprintf("127.0.%d.100", r.subnet)
	dir := r.c.t.TempDir()
	res, err := backup.Seed(context.Background(), backup.Source{Addr: from, Access: access.Config{Password: r.c.password}, Timeout: 10 * time.Second}, dir)
	if err != nil {
		return fmt.Errorf("seeding the pre-check: %w", err)
	}
	bin := "redis-server"
	if strings.Contains(p.Spec.Containers[0].Image, "valkey") {
		bin = "valkey-server"
	}
	proc := &redisProc{ip: ip, password: r.c.password, dir: dir, bin: bin,
		extra: []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-announce-ip", ip, "--cluster-node-timeout", "1000"}}
	if err := proc.run(); err != nil {
		return err
	}
	r.precheck = proc
	now := metav1.Now()
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
		InitContainerStatuses: []corev1.ContainerStatus{{Name: renderer.SeedContainerName, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: backup.SeedReportOf(res, from).Format()}}}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "redis", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
	}
	return k8s.Status().Update(context.Background(), p)
}

// A sharded cluster moves from Redis 7.0.15 to Valkey 8.0.1 under a
// cluster-aware writer that confirms every write with WAIT 1: the
// pre-check starts valkey-server in cluster mode on a copy of one shard's
// replica and holds its keys; every shard's replica restarts first, then
// each shard hands its slots to its upgraded replica with CLUSTER FAILOVER
// and its old master restarts; every restarted pod is checked against its
// shard's master; no acknowledged write is lost, every slot is served, no
// slot is left moving, and every pod runs valkey-server.
func TestIntegrationShardedRollingUpgradeToValkey(t *testing.T) {
	t.Parallel()
	c := newCluster(t, shardedOpts(31))
	g := NewWithT(t)
	r := c.playRollouts(31)
	c.waitShards(g, formedShards)
	preloadShards(g, c, 3000)
	w := c.startClusterWriter()
	g.Eventually(w.ackedCount).WithTimeout(deadline).WithPolling(poll).Should(BeNumerically(">", 300))

	start := time.Now()
	c.mergePatch(c.get(g), `{"spec":{"engine":"valkey","version":"8.0.1"}}`)
	g.Eventually(func(g Gomega) {
		cc := c.get(g)
		g.Expect(cc.Status.Operation).To(BeNil())
		g.Expect(cc.Status.Rollout.Engine).To(Equal(cachev1alpha1.EngineValkey))
		g.Expect(r.restarted()).To(HaveLen(6))
	}).WithTimeout(6 * deadline).WithPolling(poll).Should(Succeed())
	took := time.Since(start)
	pause := w.longestPause(start, time.Now())

	g.Expect(r.restarted()).To(Equal([]string{"cache-5", "cache-3", "cache-1", "cache-0", "cache-2", "cache-4"}), "replicas first, then each shard's old master")
	after := []cachev1alpha1.ShardStatus{
		{Index: 0, Slots: []string{"0-5461"}, Master: "cache-1", Replicas: []string{"cache-0"}},
		{Index: 1, Slots: []string{"5462-10922"}, Master: "cache-3", Replicas: []string{"cache-2"}},
		{Index: 2, Slots: []string{"10923-16383"}, Master: "cache-5", Replicas: []string{"cache-4"}},
	}
	c.waitShards(g, after)
	c.checkLayout(g, after)
	for _, p := range c.pods {
		g.Expect(c.serverName(g, p)).To(Equal("valkey"), p)
	}
	ev := c.events(g)
	g.Expect(ev[cachev1alpha1.EventPrecheckPassed]).To(ContainElement(MatchRegexp(`valkey 8\.0\.1 starts with the configuration on a copy of the data of 127\.0\.31\.[0-9]+:6379 and holds its [0-9]+ keys in database 0`)))
	checked := map[string]bool{}
	for _, m := range ev[cachev1alpha1.EventDataChecked] {
		name, _, _ := strings.Cut(m, " ")
		checked[name] = true
	}
	g.Expect(checked).To(HaveLen(6), "every restarted pod was read against its shard's master: %v", ev[cachev1alpha1.EventDataChecked])
	g.Expect(ev[cachev1alpha1.EventDataCheckFailed]).To(BeEmpty())
	var switched []string
	for _, m := range ev[cachev1alpha1.EventSwitchover] {
		if strings.Contains(m, "serves its slots") {
			switched = append(switched, m)
		}
	}
	g.Expect(switched).To(HaveLen(3), "%v", ev[cachev1alpha1.EventSwitchover])

	again := w.ackedCount()
	g.Eventually(w.ackedCount).WithTimeout(deadline).WithPolling(poll).Should(BeNumerically(">", again+100), func() string { return "writes go on; last error: " + w.lastError() })
	w.Stop()
	checkedWrites, lost := w.lost(g, c)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	g.Expect(preloadedLost(g, c, 3000)).To(BeZero())
	// Figures for docs/sharded.md, not limits.
	t.Logf("3 × 2 sharded redis 7.0.15 → valkey 8.0.1: %s, longest write pause %s, %d acknowledged writes checked, 0 lost",
		took.Round(time.Millisecond), pause.Round(time.Millisecond), checkedWrites)
}

// preloadShards writes n keys pre:<i> through a cluster-aware client.
func preloadShards(g Gomega, c *cluster, n int) {
	rc := c.clusterClient()
	defer rc.Close()
	ctx := context.Background()
	for i := range n {
		g.Expect(rc.Set(ctx, fmt.Sprintf("pre:%05d", i), fmt.Sprintf("v%d", i), 0).Err()).To(Succeed())
	}
}

// preloadedLost counts the preloaded keys that do not read back.
func preloadedLost(g Gomega, c *cluster, n int) int {
	rc := c.clusterClient()
	defer rc.Close()
	ctx := context.Background()
	lost := 0
	for i := range n {
		if rc.Get(ctx, fmt.Sprintf("pre:%05d", i)).Val() != fmt.Sprintf("v%d", i) {
			lost++
		}
	}
	return lost
}

// serverName is server_name of INFO server: valkey, or empty for Redis
// 7.0 (which has none).
func (c *cluster) serverName(g Gomega, pod string) string {
	rc := redisAt(c.ips[pod], c.password)
	defer rc.Close()
	info, err := rc.Info(context.Background(), "server").Result()
	g.Expect(err).NotTo(HaveOccurred(), pod)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "server_name:"); ok {
			return v
		}
	}
	return ""
}

// A change of spec.highAvailability reaches the nodes of a running sharded
// cluster live: cluster-replica-no-failover and cluster-node-timeout are
// set on every node with CONFIG SET, with a live parameter of spec.config
// changed at the same time; no server restarts.
func TestIntegrationShardedConfigurationLive(t *testing.T) {
	t.Parallel()
	c := newCluster(t, shardedOpts(32))
	g := NewWithT(t)
	c.playRollouts(32)
	c.waitShards(g, formedShards)
	pids := map[string]int{}
	for _, p := range c.pods {
		pids[p] = c.redis[p].pid()
	}
	// The nodes start with the harness's cluster-node-timeout of 1000
	// ms, which is spec's 1 s probe timeout: nothing to change.
	g.Consistently(func(g Gomega) {
		g.Expect(c.events(g)[cachev1alpha1.EventConfigApplied]).To(BeEmpty())
	}).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

	c.mergePatch(c.get(g), `{"spec":{"highAvailability":{"autoFailover":false,"probeTimeoutSeconds":2},"config":{"maxmemory-policy":"allkeys-lru"}}}`)
	g.Eventually(func(g Gomega) {
		for _, p := range c.pods {
			g.Expect(c.config(g, p, "cluster-replica-no-failover")).To(Equal("yes"), p)
			g.Expect(c.config(g, p, "cluster-node-timeout")).To(Equal("2000"), p)
			g.Expect(c.config(g, p, "maxmemory-policy")).To(Equal("allkeys-lru"), p)
		}
		cc := c.get(g)
		g.Expect(cc.Status.Operation).To(BeNil())
		g.Expect(cc.Status.Rollout.Config).To(HaveKeyWithValue("maxmemory-policy", cachev1alpha1.ConfigValue("allkeys-lru")))
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	for _, p := range c.pods {
		g.Expect(c.redis[p].pid()).To(Equal(pids[p]), "%s kept its server", p)
	}
	applied := c.events(g)[cachev1alpha1.EventConfigApplied]
	g.Expect(applied).To(ContainElement(ContainSubstring("cluster-node-timeout 2000")), "%v", applied)
}

// config is CONFIG GET of one parameter on a pod's server.
func (c *cluster) config(g Gomega, pod, param string) string {
	rc := redisAt(c.ips[pod], c.password)
	defer rc.Close()
	v, err := rc.ConfigGet(context.Background(), param).Result()
	g.Expect(err).NotTo(HaveOccurred(), pod)
	return v[param]
}

// longestPause is the longest time without an acknowledged write between
// from and to.
func (w *clusterWriter) longestPause(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	times := append([]time.Time{from}, w.ackedAt...)
	times = append(times, to)
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	var longest time.Duration
	for i := 1; i < len(times); i++ {
		if times[i].Before(from) || times[i-1].After(to) {
			continue
		}
		longest = max(longest, times[i].Sub(times[i-1]))
	}
	return longest
}
