//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/examples"
)

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	// A passed test's clusters go with it: left running, the suite's
	// earlier clusters (over a hundred redis-servers, each probed by the
	// kubelet) loaded the machine to a load average of 43 and made the
	// last tests several times slower. A failed test's namespace stays
	// for the logs and the state the suite collects at its end.
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		if err := k8s.Delete(context.Background(), ns, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting namespace %s: %v", name, err)
		}
	})
	return name
}

func loadExample(t *testing.T, name, ns string) *cachev1alpha1.CacheCluster {
	t.Helper()
	cc, err := examples.Load(name, ns)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// waitRunning waits until the CacheCluster is Running with Ready=True.
func waitRunning(g Gomega, cc *cachev1alpha1.CacheCluster) *cachev1alpha1.CacheCluster {
	got := &cachev1alpha1.CacheCluster{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(cachev1alpha1.PhaseRunning))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionReady)).To(BeTrue())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}, limits.ClusterReady, limits.Poll).Should(Succeed(), notReadyPods(cc.Namespace, "CacheCluster "+cc.Name+" never became Running and Ready"))
	return got
}

func password(g Gomega, ns, cluster string) string {
	s := &corev1.Secret{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cluster + "-auth"}, s)).To(Succeed())
	return string(s.Data["password"])
}

func pod(g Gomega, ns, name string) *corev1.Pod {
	p := &corev1.Pod{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
	return p
}

func redisAt(ip, pw string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: ip + ":6379", Password: pw, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
}

// redisPIDs is the redis-server process ID of the pods prefix-0 …
// prefix-(n-1), by pod name.
func redisPIDs(g Gomega, ns, prefix string, n int) map[string]int {
	pids := map[string]int{}
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		pid, err := env.PID(ns, name, "redis")
		g.Expect(err).NotTo(HaveOccurred())
		pids[name] = pid
	}
	return pids
}

// expectSameProcesses checks that every pod of pids still runs the
// redis-server process it ran then (why says what that shows).
func expectSameProcesses(g Gomega, ns string, pids map[string]int, why string) {
	for name, pid := range pids {
		now, err := env.PID(ns, name, "redis")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(now).To(Equal(pid), "%s %s", name, why)
	}
}

// configOf is one parameter as a pod's Redis reports it (CONFIG GET).
func configOf(g Gomega, ns, name, pw, param string) string {
	rc := redisAt(pod(g, ns, name).Status.PodIP, pw)
	defer rc.Close()
	v, err := rc.ConfigGet(context.Background(), param).Result()
	g.Expect(err).NotTo(HaveOccurred())
	return v[param]
}

// pvOf is the volume bound to a pod's data claim.
func pvOf(g Gomega, ns, podName string) *corev1.PersistentVolume {
	pvc := &corev1.PersistentVolumeClaim{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "data-" + podName}, pvc)).To(Succeed())
	pv := &corev1.PersistentVolume{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: pvc.Spec.VolumeName}, pv)).To(Succeed())
	return pv
}

// pvDir is the folder behind a pod's data claim.
func pvDir(g Gomega, ns, podName string) string {
	pv := pvOf(g, ns, podName)
	g.Expect(pv.Spec.HostPath).NotTo(BeNil())
	return pv.Spec.HostPath.Path
}

// examples/basic.yaml becomes three redis-server processes, each with its
// own data folder and the ConfigMap's redis.conf, reporting a truthful status.
func TestBasicExampleRunsThreeRedisProcesses(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-basic")
	cc := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	if os.Getenv("CACHEOPS_CAPTURE_DIR") != "" {
		g.Eventually(func(g Gomega) {
			g.Expect(getCC(g, cc).Status.Phase).To(Equal(cachev1alpha1.PhaseInitializing))
		}, limits.PodRestart, 50*time.Millisecond).Should(Succeed())
		capture(g, cc, "initializing")
	}
	// One master, two replicas linked to it (day-two), every pod ready.
	got := waitReplicating(g, cc)
	g.Expect(got.Status.ReadyReplicas).To(Equal(int32(3)))
	g.Expect(got.Status.CurrentVersion).To(Equal("7.0.15"))
	g.Expect(got.Status.Nodes).To(HaveLen(3))

	pw := password(g, ns, "basic")
	dirs := map[string]bool{}
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("basic-%d", i)
		p := pod(g, ns, name)
		g.Expect(p.Status.PodIP).To(HavePrefix("10.244."))
		g.Expect(got.Status.Nodes[i].PodName).To(Equal(name))
		g.Expect(got.Status.Nodes[i].Address).To(Equal(p.Status.PodIP))
		g.Expect(got.Status.Nodes[i].Ready).To(BeTrue())
		node := &corev1.Node{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node)).To(Succeed())
		zone := node.Labels[corev1.LabelTopologyZone]
		g.Expect(zone).To(HavePrefix("zone-"))

		// A real redis-server process, as the unprivileged user of the pod spec.
		pid, err := env.PID(ns, name, "redis")
		g.Expect(err).NotTo(HaveOccurred())
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		g.Expect(err).NotTo(HaveOccurred())
		// Debian's redis-server is a link to redis-check-rdb, which acts
		// by the name it was started under.
		want, _ := filepath.EvalSymlinks("/usr/bin/redis-server")
		g.Expect(exe).To(Equal(want))
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		g.Expect(string(cmdline)).To(HavePrefix("/usr/bin/redis-server"))
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(status)).To(MatchRegexp(`(?m)^Uid:\s+999\s`))

		rc := redisAt(p.Status.PodIP, pw)
		info, err := rc.Info(ctx, "server").Result()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info).To(ContainSubstring("config_file:/etc/redis/redis.conf"))
		g.Expect(rc.ConfigGet(ctx, "dir").Val()).To(HaveKeyWithValue("dir", "/data"))
		g.Expect(rc.ConfigGet(ctx, "appendonly").Val()).To(HaveKeyWithValue("appendonly", "yes"))
		// The password from the Secret is required.
		g.Expect(redisAt(p.Status.PodIP, "wrong").Ping(ctx).Err()).To(MatchError(ContainSubstring("WRONGPASS")))

		// /data is the pod's own volume folder.
		g.Expect(rc.Save(ctx).Err()).To(Succeed())
		dir := pvDir(g, ns, name)
		// The volume is bound to the pod's node and labelled with its zone,
		// so a recreated pod lands in the same zone.
		g.Expect(pvOf(g, ns, name).Labels).To(HaveKeyWithValue(corev1.LabelTopologyZone, zone))
		g.Expect(filepath.Join(dir, "dump.rdb")).To(BeAnExistingFile())
		dirs[dir] = true
		_ = rc.Close()
	}
	g.Expect(dirs).To(HaveLen(3), "every pod has its own data folder")
}

// A pod whose process is killed restarts in place; a deleted pod comes back
// through the StatefulSet on the same volume. Both keep what was written.
func TestKilledPodComesBackWithItsData(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-restart")
	cc := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	got := waitReplicating(g, cc)
	pw := password(g, ns, "basic")

	// Written on the master, confirmed by both replicas.
	m := redisAt(pod(g, ns, got.Status.CurrentMaster).Status.PodIP, pw)
	g.Expect(m.Set(ctx, "before-kill", "kept", 0).Err()).To(Succeed())
	g.Expect(m.Do(ctx, "WAIT", 2, 5000).Int64()).To(Equal(int64(2)))
	_ = m.Close()

	// A replica is killed, then deleted; it keeps its data folder and data.
	victim := "basic-1"
	if got.Status.CurrentMaster == victim {
		victim = "basic-2"
	}
	p := pod(g, ns, victim)
	dir := pvDir(g, ns, victim)
	oldPID, err := env.PID(ns, victim, "redis")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.KillContainer(ns, victim, "redis")).To(Succeed())
	g.Eventually(func(g Gomega) {
		p := pod(g, ns, victim)
		g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
		g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">=", 1))
		g.Expect(p.Status.ContainerStatuses[0].Ready).To(BeTrue())
		pid, err := env.PID(ns, victim, "redis")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pid).NotTo(Equal(oldPID))
		rc := redisAt(p.Status.PodIP, pw)
		defer rc.Close()
		g.Expect(rc.Get(ctx, "before-kill").Val()).To(Equal("kept"))
	}, limits.PodRestart, limits.Poll).Should(Succeed())

	// Deleting the pod: the StatefulSet makes a new one on the same claim.
	oldUID := p.UID
	g.Expect(k8s.Delete(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		p := pod(g, ns, victim)
		g.Expect(p.UID).NotTo(Equal(oldUID))
		g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
		g.Expect(p.Status.ContainerStatuses[0].Ready).To(BeTrue())
		g.Expect(pvDir(g, ns, victim)).To(Equal(dir))
		rc := redisAt(p.Status.PodIP, pw)
		defer rc.Close()
		g.Expect(rc.Get(ctx, "before-kill").Val()).To(Equal("kept"))
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	waitRunning(g, cc)
}

// Deleting a CacheCluster stops its processes and, unless retained, removes
// its data folders.
func TestDeleteStopsProcessesAndRemovesData(t *testing.T) {
	t.Parallel()
	for _, retain := range []bool{false, true} {
		name := map[bool]string{false: "e2e-delete", true: "e2e-retain"}[retain]
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := newNamespace(t, name)
			cc := loadExample(t, "basic", ns)
			cc.Spec.Replicas = ptrTo[int32](2)
			cc.Spec.Storage.RetainOnDelete = retain
			g.Expect(k8s.Create(ctx, cc)).To(Succeed())
			waitRunning(g, cc)

			var pids []int
			var dirs []string
			for i := 0; i < 2; i++ {
				podName := fmt.Sprintf("basic-%d", i)
				pid, err := env.PID(ns, podName, "redis")
				g.Expect(err).NotTo(HaveOccurred())
				pids = append(pids, pid)
				dirs = append(dirs, pvDir(g, ns, podName))
			}

			g.Expect(k8s.Delete(ctx, cc)).To(Succeed())
			capture(g, cc, "deleting")
			g.Eventually(func(g Gomega) {
				err := k8s.Get(ctx, client.ObjectKeyFromObject(cc), &cachev1alpha1.CacheCluster{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
				pods := &corev1.PodList{}
				g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
				g.Expect(pods.Items).To(BeEmpty())
				for _, pid := range pids {
					_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
					g.Expect(os.IsNotExist(err)).To(BeTrue(), "process %d still runs", pid)
				}
			}, limits.Cleanup, limits.Poll).Should(Succeed())

			pvcs := &corev1.PersistentVolumeClaimList{}
			if retain {
				g.Consistently(func(g Gomega) {
					g.Expect(k8s.List(ctx, pvcs, client.InNamespace(ns))).To(Succeed())
					g.Expect(pvcs.Items).To(HaveLen(2))
					for _, d := range dirs {
						g.Expect(filepath.Join(d, "appendonly")).To(BeADirectory())
					}
				}, 3*time.Second, limits.Poll).Should(Succeed())
				return
			}
			g.Eventually(func(g Gomega) {
				g.Expect(k8s.List(ctx, pvcs, client.InNamespace(ns))).To(Succeed())
				g.Expect(pvcs.Items).To(BeEmpty())
				for _, d := range dirs {
					_, err := os.Stat(d)
					g.Expect(os.IsNotExist(err)).To(BeTrue(), "data folder %s still exists", d)
				}
			}, limits.Cleanup, limits.Poll).Should(Succeed())
		})
	}
}

// The harness's fault-injection tools (freeze, partition, node stop) do
// what they say. This tests the process-backed cluster, not the operator:
// the failover, restart and self-healing tests use these tools, and a tool
// that silently did nothing would let them pass without a fault.
func TestHarnessFaultTools(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-faults")
	cc := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	waitRunning(g, cc)
	pw := password(g, ns, "basic")
	p := pod(g, ns, "basic-2")
	rc := redisAt(p.Status.PodIP, pw)
	defer rc.Close()
	g.Expect(rc.Ping(ctx).Err()).To(Succeed())

	t.Run("freeze and thaw", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(env.Freeze(ns, "basic-2", "redis")).To(Succeed())
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		g.Expect(rc.Ping(short).Err()).To(HaveOccurred())
		cancel()
		g.Expect(env.Thaw(ns, "basic-2", "redis")).To(Succeed())
		g.Eventually(func() error { return rc.Ping(ctx).Err() }, 10*time.Second, limits.Poll).Should(Succeed())
	})

	t.Run("partition and reconnect", func(t *testing.T) {
		g := NewWithT(t)
		peer := pod(g, ns, "basic-0")
		g.Expect(env.Partition(ns, "basic-2")).To(Succeed())
		fresh := redisAt(p.Status.PodIP, pw)
		g.Expect(fresh.Ping(ctx).Err()).To(HaveOccurred())
		_ = fresh.Close()
		// The pod cannot reach its peers either.
		pid, err := env.PID(ns, "basic-2", "redis")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(canReach(pid, peer.Status.PodIP)).To(BeFalse())
		g.Expect(env.Reconnect(ns, "basic-2")).To(Succeed())
		g.Eventually(func() error {
			c := redisAt(p.Status.PodIP, pw)
			defer c.Close()
			return c.Ping(ctx).Err()
		}, 10*time.Second, limits.Poll).Should(Succeed())
		g.Expect(canReach(pid, peer.Status.PodIP)).To(BeTrue())
	})

	t.Run("stop and start a node", func(t *testing.T) {
		g := NewWithT(t)
		node := p.Spec.NodeName
		g.Expect(env.StopNode(node)).To(Succeed())
		g.Eventually(func(g Gomega) {
			n := &corev1.Node{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					g.Expect(c.Status).NotTo(Equal(corev1.ConditionTrue))
				}
			}
		}, time.Minute, limits.Poll).Should(Succeed(), "a stopped node turns NotReady")
		g.Expect(env.StartNode(ctx, node)).To(Succeed())
		g.Eventually(func(g Gomega) {
			c := redisAt(pod(g, ns, "basic-2").Status.PodIP, pw)
			defer c.Close()
			g.Expect(c.Ping(ctx).Err()).To(Succeed())
		}, limits.PodRestart, limits.Poll).Should(Succeed())
	})

	t.Run("restart the API server", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(env.RestartAPIServer()).To(Succeed())
		g.Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKeyFromObject(cc), &cachev1alpha1.CacheCluster{})
		}, time.Minute, limits.Poll).Should(Succeed())
		// The operator carries on: a new cluster after the restart runs.
		other := loadExample(t, "basic", ns)
		other.Name = "after-restart"
		other.Spec.Replicas = ptrTo[int32](1)
		g.Expect(k8s.Create(ctx, other)).To(Succeed())
		waitRunning(g, other)
	})
	waitRunning(g, cc)
}

// canReach tells whether a pod's network namespace can open a TCP
// connection to ip:6379.
func canReach(pid int, ip string) bool {
	out, err := execIn(pid, "redis-cli", "-h", ip, "-p", "6379", "-e", "ping")
	return err == nil || strings.Contains(out, "NOAUTH")
}

func ptrTo[T any](v T) *T { return &v }

// execIn runs a program in a process's network namespace, bounded to 3s.
func execIn(pid int, args ...string) (string, error) {
	cmdArgs := append([]string{"-t", fmt.Sprint(pid), "-n", "--", "timeout", "3"}, args...)
	out, err := exec.Command("nsenter", cmdArgs...).CombinedOutput()
	return string(out), err
}
