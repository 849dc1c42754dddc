//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// workload writes numbered keys through the client Service's endpoint (the
// pod labelled master), confirms each with WAIT 1 (at least one replica has
// it) and remembers only confirmed writes. Verify reads them back.
type workload struct {
	ns, cluster, password string
	// username, when set, is the ACL user the writer authenticates as (a
	// cluster with spec.users); password is then that user's.
	username string
	// reconnect, set under mu, makes the writer open a new connection
	// (with the password as it is then) before its next write.
	reconnect bool
	// tls, when set, is the client side of TLS (a cluster with spec.tls).
	tls *tls.Config

	// sticky keeps the connection until a write fails, as an application
	// behind a Service does (open connections outlive endpoint changes);
	// otherwise the endpoint is looked up again once a second.
	sticky bool
	// waitMs is the WAIT timeout.
	waitMs int

	mu       sync.Mutex
	acked    map[string]string
	ackedAt  []time.Time
	attempts int
	failures int
	stop     chan struct{}
	done     chan struct{}
	// every, when set, is the least time between two writes: it bounds
	// the keys the workload adds, whatever the machine's speed.
	every time.Duration
	// errs counts the failed writes' errors by text (at most 20 texts).
	errs map[string]int
}

func startWorkload(ns, cluster, password string) *workload {
	return startWorkloadEvery(ns, cluster, password, 0)
}

// startWorkloadEvery starts a workload that writes at most once every
// interval (0: as fast as it can).
func startWorkloadEvery(ns, cluster, password string, every time.Duration) *workload {
	w := &workload{ns: ns, cluster: cluster, password: password, waitMs: 500, acked: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{}), every: every}
	go w.run()
	return w
}

// startStickyWorkload is a writer that keeps its connection until a write
// fails, confirming each write with WAIT 1 300.
func startStickyWorkload(ns, cluster, password string) *workload {
	w := &workload{ns: ns, cluster: cluster, password: password, sticky: true, waitMs: 300, acked: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// masterEndpoint is the address the client Service sends traffic to.
func (w *workload) masterEndpoint(ctx context.Context) (string, error) {
	slices := &discoveryv1.EndpointSliceList{}
	if err := k8s.List(ctx, slices, client.InNamespace(w.ns), client.MatchingLabels{discoveryv1.LabelServiceName: w.cluster}); err != nil {
		return "", err
	}
	var addrs []string
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				addrs = append(addrs, e.Addresses...)
			}
		}
	}
	if len(addrs) != 1 {
		return "", fmt.Errorf("client Service has %d ready endpoints", len(addrs))
	}
	return addrs[0], nil
}

func (w *workload) run() {
	defer close(w.done)
	ctx := context.Background()
	var rc *redis.Client
	var addr string
	var resolved time.Time
	defer func() {
		if rc != nil {
			_ = rc.Close()
		}
	}()
	var last time.Time
	for i := 0; ; i++ {
		if w.every > 0 {
			select {
			case <-w.stop:
				return
			case <-time.After(time.Until(last.Add(w.every))):
			}
			last = time.Now()
		}
		select {
		case <-w.stop:
			return
		default:
		}
		// Like a client behind the Service: keep the connection, look the
		// endpoint up again after an error or once a second.
		if rc == nil || (!w.sticky && time.Since(resolved) > time.Second) {
			ep, err := w.masterEndpoint(ctx)
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			resolved = time.Now()
			if ep != addr && rc != nil {
				_ = rc.Close()
				rc = nil
			}
			addr = ep
		}
		w.mu.Lock()
		pw, again := w.password, w.reconnect
		w.reconnect = false
		w.mu.Unlock()
		if again && rc != nil {
			_ = rc.Close()
			rc = nil
		}
		if rc == nil {
			rc = redis.NewClient(&redis.Options{Addr: addr + ":6379", Username: w.username, Password: pw, TLSConfig: w.tls, DialTimeout: 300 * time.Millisecond,
				ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, MaxRetries: -1, PoolSize: 1})
		}
		key, val := fmt.Sprintf("w:%06d", i), fmt.Sprintf("v%d-%d", i, time.Now().UnixNano())
		w.mu.Lock()
		w.attempts++
		w.mu.Unlock()
		opCtx, cancel := context.WithTimeout(ctx, time.Second)
		err := rc.Set(opCtx, key, val, 0).Err()
		var replicas int64
		if err == nil {
			replicas, err = rc.Do(opCtx, "WAIT", 1, w.waitMs).Int64()
		}
		cancel()
		if err == nil && replicas >= 1 {
			w.mu.Lock()
			w.acked[key] = val
			w.ackedAt = append(w.ackedAt, time.Now())
			w.mu.Unlock()
			continue
		}
		w.mu.Lock()
		w.failures++
		if err != nil {
			if w.errs == nil {
				w.errs = map[string]int{}
			}
			if _, ok := w.errs[err.Error()]; ok || len(w.errs) < 20 {
				w.errs[err.Error()]++
			}
		}
		w.mu.Unlock()
		_ = rc.Close()
		rc = nil
		resolved = time.Time{}
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *workload) Stop() {
	close(w.stop)
	<-w.done
}

// Verify reads every acknowledged key from the master and returns the lost
// or changed ones.
func (w *workload) Verify(g Gomega) (checked int, lost []string) {
	ctx := context.Background()
	var ep string
	g.Eventually(func() error {
		var err error
		ep, err = w.masterEndpoint(ctx)
		return err
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	w.mu.Lock()
	pw := w.password
	w.mu.Unlock()
	rc := redis.NewClient(&redis.Options{Addr: ep + ":6379", Username: w.username, Password: pw, TLSConfig: w.tls, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
	defer rc.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]string, 0, len(w.acked))
	for k := range w.acked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for len(keys) > 0 {
		batch := keys[:min(len(keys), 1000)]
		keys = keys[len(batch):]
		pipe := rc.Pipeline()
		gets := make([]*redis.StringCmd, len(batch))
		for i, k := range batch {
			gets[i] = pipe.Get(ctx, k)
		}
		_, _ = pipe.Exec(ctx)
		for i, k := range batch {
			if got, err := gets[i].Result(); err != nil || got != w.acked[k] {
				lost = append(lost, k)
			}
		}
	}
	return len(w.acked), lost
}

// longestPause is the longest time between two acknowledged writes in
// [from, to]: how long clients could not write.
func (w *workload) longestPause(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var longest time.Duration
	prev := from
	for _, t := range w.ackedAt {
		if t.Before(from) || t.After(to) {
			continue
		}
		longest = max(longest, t.Sub(prev))
		prev = t
	}
	return longest
}

func (w *workload) ackedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// masterWatch follows every change of the pods' role labels and remembers
// the most pods ever labelled master at once.
type masterWatch struct {
	mu     sync.Mutex
	labels map[string]string
	max    int
	stop   func()
}

func watchMasters(t *testing.T, ns string) *masterWatch {
	wc, err := client.NewWithWatch(env.Config(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &masterWatch{labels: map[string]string{}, stop: cancel}
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				m.mu.Lock()
				if ev.Type == watch.Deleted {
					delete(m.labels, p.Name)
				} else {
					m.labels[p.Name] = p.Labels[cachev1alpha1.LabelRole]
				}
				n := 0
				for _, l := range m.labels {
					if l == cachev1alpha1.RoleMaster {
						n++
					}
				}
				if n > m.max {
					m.max = n
				}
				m.mu.Unlock()
			}
		}
	}()
	return m
}

func (m *masterWatch) Max() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.max
}

// waitReplicating waits until the cluster runs with one master and every
// other pod a replica linked to it.
func waitReplicating(g Gomega, cc *cachev1alpha1.CacheCluster) *cachev1alpha1.CacheCluster {
	var got *cachev1alpha1.CacheCluster
	g.Eventually(func(g Gomega) {
		got = waitRunning(g, cc)
		g.Expect(got.Status.CurrentMaster).NotTo(BeEmpty())
		g.Expect(got.Status.Operation).To(BeNil())
		masters := 0
		for _, n := range got.Status.Nodes {
			if n.Role == cachev1alpha1.RoleMaster {
				masters++
				g.Expect(n.PodName).To(Equal(got.Status.CurrentMaster))
			} else {
				g.Expect(n.Role).To(Equal(cachev1alpha1.RoleReplica), n.PodName)
			}
		}
		g.Expect(masters).To(Equal(1))
		master := pod(g, cc.Namespace, got.Status.CurrentMaster)
		rc := operatorAt(g, got, master.Status.PodIP)
		defer rc.Close()
		info, err := rc.Info(context.Background(), "replication").Result()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info).To(ContainSubstring(fmt.Sprintf("connected_slaves:%d", len(got.Status.Nodes)-1)))
	}, limits.ClusterReady, limits.Poll).Should(Succeed(), notReadyPods(cc.Namespace, "CacheCluster "+cc.Name+" never replicated"))
	return got
}

// underLoad creates examples/basic (probe timeout 1 s) in a new namespace
// and, once it replicates, starts the writer and the watch on master labels.
func underLoad(t *testing.T, g Gomega, ns string) (cc, before *cachev1alpha1.CacheCluster, w *workload, masters *masterWatch) {
	newNamespace(t, ns)
	cc = loadExample(t, "basic", ns)
	cc.Spec.HighAvailability.ProbeTimeoutSeconds = 1
	g.Expect(k8s.Create(context.Background(), cc)).To(Succeed())
	before = waitReplicating(g, cc)
	masters = watchMasters(t, ns)
	t.Cleanup(masters.stop)
	w = startWorkload(ns, "basic", password(g, ns, "basic"))
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 50))
	return cc, before, w, masters
}

// finish waits until writes go on, stops the writer and checks that no
// acknowledged write was lost and that never two pods carried the master
// label. It returns how many writes were checked.
func (w *workload) finish(t *testing.T, g Gomega, masters *masterWatch) int {
	n := w.ackedCount()
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", n+20), "writes go on")
	w.Stop()
	checked, lost := w.Verify(g)
	w.mu.Lock()
	attempts, failures := w.attempts, w.failures
	w.mu.Unlock()
	t.Logf("%d acknowledged writes checked (%d attempts, %d unacknowledged)", checked, attempts, failures)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	g.Expect(masters.Max()).To(Equal(1), "two pods carried the master label at once")
	return checked
}

// failoverCase runs one fault against the master under the workload. It
// returns the master before the fault and the cluster once it replicates
// again, for a test to check who is master now.
func failoverCase(t *testing.T, ns string, fault func(g Gomega, master string), heal func(g Gomega, master string)) (old string, after *cachev1alpha1.CacheCluster) {
	g := NewWithT(t)
	cc, before, w, masters := underLoad(t, g, ns)
	old = before.Status.CurrentMaster
	fault(g, old)
	// The cluster must fail over (or heal) and keep taking writes.
	n := w.ackedCount()
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", n+50), "writes resume after the fault")
	if heal != nil {
		heal(g, old)
	}
	after = waitReplicating(g, cc)
	t.Logf("master %s → %s", old, after.Status.CurrentMaster)
	w.finish(t, g, masters)
	return old, after
}

func TestFailoverFrozenMaster(t *testing.T) {
	t.Parallel()
	ns := "e2e-fo-freeze"
	failoverCase(t, ns,
		func(g Gomega, master string) {
			g.Expect(env.Freeze(ns, master, "redis")).To(Succeed())
			// Past the timeout: a failover must happen.
			g.Eventually(func(g Gomega) {
				cc := &cachev1alpha1.CacheCluster{}
				g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "basic"}, cc)).To(Succeed())
				g.Expect(cc.Status.CurrentMaster).NotTo(Equal(master))
				g.Expect(cc.Status.CurrentMaster).NotTo(BeEmpty())
			}, limits.PodRestart, limits.Poll).Should(Succeed())
		},
		func(g Gomega, master string) {
			g.Expect(env.Thaw(ns, master, "redis")).To(Succeed())
			// It comes back as a replica.
			g.Eventually(func(g Gomega) {
				p := pod(g, ns, master)
				rc := redisAt(p.Status.PodIP, password(g, ns, "basic"))
				defer rc.Close()
				info, err := rc.Info(context.Background(), "replication").Result()
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(info).To(ContainSubstring("role:slave"))
			}, limits.PodRestart, limits.Poll).Should(Succeed())
		})
	g := NewWithT(t)
	reasons := eventsByReason(g, ns)
	g.Expect(reasons).To(HaveKey(cachev1alpha1.EventFailoverStarted))
	g.Expect(reasons).To(HaveKey(cachev1alpha1.EventFailoverCompleted))
	g.Expect(reasons).To(HaveKey(cachev1alpha1.EventFenced))
}

func TestFailoverKilledMaster(t *testing.T) {
	t.Parallel()
	ns := "e2e-fo-kill"
	old, after := failoverCase(t, ns, func(g Gomega, master string) {
		g.Expect(env.KillContainer(ns, master, "redis")).To(Succeed())
	}, nil)
	// A restart in place would pass everything above: the master must have
	// moved, and the killed one must follow the new master in Redis.
	g := NewWithT(t)
	g.Expect(after.Status.CurrentMaster).NotTo(Equal(old), "the killed master was replaced")
	g.Eventually(func(g Gomega) {
		pw := password(g, ns, "basic")
		rc := redisAt(pod(g, ns, old).Status.PodIP, pw)
		defer rc.Close()
		info, err := rc.Info(context.Background(), "replication").Result()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info).To(ContainSubstring("role:slave\r\n"), old)
		g.Expect(info).To(ContainSubstring("master_host:"+pod(g, ns, after.Status.CurrentMaster).Status.PodIP+"\r\n"), old)
		g.Expect(info).To(ContainSubstring("master_link_status:up\r\n"), old)
	}, limits.PodRestart, limits.Poll).Should(Succeed(), "the old master follows the new one")
}

func TestFailoverPartitionedMaster(t *testing.T) {
	t.Parallel()
	ns := "e2e-fo-partition"
	failoverCase(t, ns,
		func(g Gomega, master string) {
			g.Expect(env.Partition(ns, master)).To(Succeed())
			g.Eventually(func(g Gomega) {
				cc := &cachev1alpha1.CacheCluster{}
				g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "basic"}, cc)).To(Succeed())
				g.Expect(cc.Status.CurrentMaster).NotTo(Equal(master))
			}, limits.PodRestart, limits.Poll).Should(Succeed())
		},
		func(g Gomega, master string) {
			g.Expect(env.Reconnect(ns, master)).To(Succeed())
		})
}

func TestReplicaKilledLosesNothing(t *testing.T) {
	t.Parallel()
	ns := "e2e-fo-replica"
	failoverCase(t, ns, func(g Gomega, master string) {
		replica := "basic-2"
		if master == replica {
			replica = "basic-1"
		}
		g.Expect(env.KillContainer(ns, replica, "redis")).To(Succeed())
	}, nil)
}

func TestTwoFailoversInARow(t *testing.T) {
	t.Parallel()
	ns := "e2e-fo-twice"
	freezeUntilReplaced := func(g Gomega, master string) {
		g.Expect(env.Freeze(ns, master, "redis")).To(Succeed())
		g.Eventually(func(g Gomega) {
			cc := &cachev1alpha1.CacheCluster{}
			g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "basic"}, cc)).To(Succeed())
			g.Expect(cc.Status.CurrentMaster).NotTo(Equal(master))
			g.Expect(cc.Status.Operation).To(BeNil())
		}, limits.PodRestart, limits.Poll).Should(Succeed())
		g.Expect(env.Thaw(ns, master, "redis")).To(Succeed())
	}
	failoverCase(t, ns, func(g Gomega, master string) {
		freezeUntilReplaced(g, master)
		// The second master, replaced in turn.
		cc := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "basic"}, cc)).To(Succeed())
		freezeUntilReplaced(g, cc.Status.CurrentMaster)
	}, nil)
}

// The operator dies after recording a failover and before finishing it; the
// restarted operator finishes the same failover (same operation id), not a
// second one. The crash is placed with --fault-exit-after-step: a failover
// takes well under 100 ms, too short to hit by killing the process from
// outside.
func TestOperatorKilledMidFailover(t *testing.T) {
	ns := "e2e-fo-crash"
	var opID string
	t.Cleanup(func() {
		if t.Failed() { // leave the next tests a manager that watches everything
			killManager()
			_ = startManager(managerBin, stateDir)
		}
	})
	failoverCase(t, ns, func(g Gomega, master string) {
		killManager()
		g.Expect(startManager(managerBin, stateDir, "--watch-namespaces="+ns, "--fault-exit-after-step=Promote")).To(Succeed())
		g.Expect(env.Freeze(ns, master, "redis")).To(Succeed())
		code, err := managerExit(limits.PodRestart)
		g.Expect(err).NotTo(HaveOccurred(), "the manager exits after promoting a replica")
		g.Expect(code).To(Equal(3))
		cc := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "basic"}, cc)).To(Succeed())
		g.Expect(cc.Status.Operation).NotTo(BeNil(), "the failover is recorded and unfinished")
		g.Expect(cc.Status.Operation.Type).To(Equal(cachev1alpha1.OperationFailover))
		opID = cc.Status.Operation.ID
		g.Expect(startManager(managerBin, stateDir)).To(Succeed())
	}, func(g Gomega, master string) {
		g.Expect(env.Thaw(ns, master, "redis")).To(Succeed())
	})
	g := NewWithT(t)
	reasons := eventsByReason(g, ns)
	g.Expect(reasons[cachev1alpha1.EventFailoverStarted]).To(HaveLen(1), "one failover, not a second one")
	g.Expect(reasons[cachev1alpha1.EventFailoverCompleted]).To(HaveLen(1))
	g.Expect(reasons[cachev1alpha1.EventFailoverCompleted][0].Message).To(ContainSubstring(opID))
}

// eventsByReason lists a namespace's Events by reason. Similar Events are
// merged into one series, so a count says how many distinct ones there were.
func eventsByReason(g Gomega, ns string) map[string][]corev1.Event {
	events := &corev1.EventList{}
	g.Expect(k8s.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
	out := map[string][]corev1.Event{}
	for _, e := range events.Items {
		out[e.Reason] = append(out[e.Reason], e)
	}
	return out
}

// A master frozen and thawed at any point of a failover loses no
// acknowledged write (issue 13). The writer keeps one connection to the
// pod labelled master, reconnecting only when a write fails, so it keeps
// writing to an old master that comes back. Freezes end before the
// failover starts (0.6 and 0.9 x the probe timeout), about when it starts
// and while it runs (1.0, 1.1, 1.5 x) and after it ended (3 x). Every round
// ends with one master and every other pod replicating from it; at the end
// every acknowledged write is read back and never two pods carried the
// master label at once.
func TestFailoverMasterThawedAtAnyPoint(t *testing.T) {
	t.Parallel()
	ns := "e2e-fo-thaw"
	g := NewWithT(t)
	newNamespace(t, ns)
	cc := loadExample(t, "basic", ns)
	cc.Spec.HighAvailability.ProbeTimeoutSeconds = 1
	g.Expect(k8s.Create(context.Background(), cc)).To(Succeed())
	waitReplicating(g, cc)
	masters := watchMasters(t, ns)
	t.Cleanup(masters.stop)
	pw := password(g, ns, "basic")
	w := startStickyWorkload(ns, "basic", pw)
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 50))

	timeout := time.Duration(cc.Spec.HighAvailability.ProbeTimeoutSeconds) * time.Second
	factors := []float64{0.6, 0.9, 1.0, 1.1, 1.5, 3}
	rounds, failovers := 0, 0
	for pass := 0; pass < 2; pass++ {
		for _, f := range factors {
			rounds++
			cur := &cachev1alpha1.CacheCluster{}
			g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), cur)).To(Succeed())
			old := cur.Status.CurrentMaster
			freeze := time.Duration(f * float64(timeout))
			start := time.Now()
			g.Expect(env.Freeze(ns, old, "redis")).To(Succeed())
			time.Sleep(freeze)
			g.Expect(env.Thaw(ns, old, "redis")).To(Succeed())
			after := waitAllReplicating(g, cc)
			if after.Status.CurrentMaster != old {
				failovers++
			}
			n := w.ackedCount()
			g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", n+20), "writes go on after round %d", rounds)
			t.Logf("round %d: %s frozen %s at %s; master %s → %s; %d writes acknowledged so far",
				rounds, old, freeze, start.Format("15:04:05.000"), old, after.Status.CurrentMaster, w.ackedCount())
			time.Sleep(3 * time.Second)
		}
	}
	w.Stop()
	checked, lost := w.Verify(g)
	w.mu.Lock()
	attempts, failures := w.attempts, w.failures
	w.mu.Unlock()
	t.Logf("%d rounds, %d failovers, %d acknowledged writes checked (%d attempts, %d unacknowledged), %d lost", rounds, failovers, checked, attempts, failures, len(lost))
	if len(lost) > 0 {
		t.Logf("lost (first 20): %v", lost[:min(len(lost), 20)])
	}
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	g.Expect(masters.Max()).To(Equal(1), "two pods carried the master label at once")
	g.Expect(failovers).To(BeNumerically(">", 0), "some freezes must outlast the probe timeout")
}

// waitAllReplicating waits until the cluster is replicating (see
// waitReplicating) and every replica's own link to the master is up.
func waitAllReplicating(g Gomega, cc *cachev1alpha1.CacheCluster) *cachev1alpha1.CacheCluster {
	var got *cachev1alpha1.CacheCluster
	g.Eventually(func(g Gomega) {
		got = waitReplicating(g, cc)
		pw := password(g, cc.Namespace, cc.Name)
		master := pod(g, cc.Namespace, got.Status.CurrentMaster)
		for _, n := range got.Status.Nodes {
			if n.PodName == got.Status.CurrentMaster {
				continue
			}
			p := pod(g, cc.Namespace, n.PodName)
			rc := redisAtTLS(p.Status.PodIP, pw, clusterTLS(g, got))
			info, err := rc.Info(context.Background(), "replication").Result()
			_ = rc.Close()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(info).To(ContainSubstring("role:slave"), n.PodName)
			g.Expect(info).To(ContainSubstring("master_host:"+master.Status.PodIP+"\r\n"), n.PodName)
			g.Expect(info).To(ContainSubstring("master_link_status:up"), n.PodName)
		}
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
	return got
}
