//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// mergePatch changes a CacheCluster as `kubectl patch --type merge` does.
func mergePatch(g Gomega, cc *cachev1alpha1.CacheCluster, patch string) {
	obj := &cachev1alpha1.CacheCluster{}
	obj.Namespace, obj.Name = cc.Namespace, cc.Name
	g.Expect(k8s.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

func getCC(g Gomega, cc *cachev1alpha1.CacheCluster) *cachev1alpha1.CacheCluster {
	got := &cachev1alpha1.CacheCluster{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), got)).To(Succeed())
	return got
}

// podUIDs maps each pod of a cluster to its UID.
func podUIDs(g Gomega, ns string) map[string]types.UID {
	pods := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), pods, client.InNamespace(ns), client.HasLabels{cachev1alpha1.LabelCluster})).To(Succeed())
	out := map[string]types.UID{}
	for _, p := range pods.Items {
		out[p.Name] = p.UID
	}
	return out
}

// restartsInOrder reads the pods an operation restarted, oldest first,
// from its PodRestarted Events.
func restartsInOrder(g Gomega, ns string) []string {
	events := eventsByReason(g, ns)[cachev1alpha1.EventPodRestarted]
	sort.Slice(events, func(i, j int) bool { return eventTime(events[i]).Before(eventTime(events[j])) })
	var pods []string
	for _, e := range events {
		_, after, _ := strings.Cut(e.Message, "restarting ")
		name, _, _ := strings.Cut(after, " ")
		pods = append(pods, name)
	}
	return pods
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// kubectlCache runs the CLI against the test cluster.
func kubectlCache(g Gomega, args ...string) string {
	cmd := exec.Command(cliBin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig())
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	return string(out)
}

// A cluster scaled 3→5 and then to 2 while a client writes, with the
// master on an ordinal that goes away: the master moves first, no
// acknowledged write is lost, never two masters.
func TestScaleUpAndDownWhileWriting(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := "e2e-scale"
	cc, _, w, masters := underLoad(t, g, ns)

	mergePatch(g, cc, `{"spec":{"replicas":5}}`)
	g.Eventually(func(g Gomega) {
		g.Expect(getCC(g, cc).Status.Phase).To(Equal(cachev1alpha1.PhaseScaling))
	}, limits.PodRestart, 50*time.Millisecond).Should(Succeed(), "the phase says the cluster is scaling")
	capture(g, cc, "scaling")
	got := waitReplicating(g, cc)
	g.Expect(got.Status.Nodes).To(HaveLen(5))

	// Move the master to the highest ordinal with the CLI.
	start := time.Now()
	out := kubectlCache(g, "switchover", "basic", "-n", ns, "--to", "basic-4", "--wait", "2m")
	g.Expect(out).To(ContainSubstring("basic-4 is the master"))
	g.Expect(kubectlCache(g, "status", "basic", "-n", ns)).To(MatchRegexp(`basic-4\s+master\s+10\.`))
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		g.Expect(got.Status.CurrentMaster).To(Equal("basic-4"))
		g.Expect(got.Status.Operation).To(BeNil())
		g.Expect(got.Annotations).NotTo(HaveKey(cachev1alpha1.AnnotationSwitchoverTo))
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	n := w.ackedCount()
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", n+20))
	t.Logf("switchover basic-0→basic-4: longest write pause %s", w.longestPause(start, time.Now()).Round(time.Millisecond))

	mergePatch(g, cc, `{"spec":{"replicas":2}}`)
	g.Eventually(func(g Gomega) {
		got := waitReplicating(g, cc)
		g.Expect(got.Status.Nodes).To(HaveLen(2))
		g.Expect(got.Status.CurrentMaster).To(BeElementOf("basic-0", "basic-1"))
		g.Expect(got.Status.Rollout.Replicas).To(Equal(int32(2)))
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
	started := eventsByReason(g, ns)[cachev1alpha1.EventOperationStarted]
	g.Expect(started).To(ContainElement(HaveField("Message", ContainSubstring("replicas 5→2: switchover first, the master is on ordinal 4"))))
	// The claims of the removed pods follow the retention policy (Delete).
	for _, name := range []string{"basic-2", "basic-3", "basic-4"} {
		g.Eventually(func() bool {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + name}, &corev1.PersistentVolumeClaim{})
			return apierrors.IsNotFound(err)
		}, limits.Cleanup, limits.Poll).Should(BeTrue(), "claim of %s removed", name)
	}

	w.finish(t, g, masters)
}

// Redis 7.0.15 → Valkey 8.0.1 under writes restarts the pods one at a
// time, replicas first from the highest ordinal, then a switchover, the
// old master last, as kubectl cache plan --live predicted; no pod ever
// tries to replicate from a master whose RDB format it cannot read; a
// replicas change made meanwhile waits and runs after it; going back to
// Redis afterwards is refused and touches nothing.
func TestRollingUpgradeInOrder(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := "e2e-upgrade"
	cc, before, w, masters := underLoad(t, g, ns)
	uids := podUIDs(g, ns)

	// What `kubectl cache plan --live` predicts for this change: the
	// manifests before and after, the master read from the cluster.
	dir := t.TempDir()
	manifest := func(name string, engine cachev1alpha1.Engine, version string) string {
		m := loadExample(t, "basic", ns)
		m.Spec.HighAvailability.ProbeTimeoutSeconds = 1
		m.Spec.Engine, m.Spec.Version = engine, version
		data, err := yaml.Marshal(m)
		g.Expect(err).NotTo(HaveOccurred())
		path := filepath.Join(dir, name)
		g.Expect(m.Kind).To(Equal("CacheCluster"))
		g.Expect(os.WriteFile(path, data, 0o644)).To(Succeed())
		return path
	}
	out := kubectlCache(g, "plan", "--base", manifest("base.yaml", cachev1alpha1.EngineRedis, "7.0.15"), "--head", manifest("head.yaml", cachev1alpha1.EngineValkey, "8.0.1"), "--live", "--format", "json")
	var plans []struct {
		Operations []struct {
			Type     string   `json:"type"`
			Restarts []string `json:"restarts"`
		} `json:"operations"`
	}
	g.Expect(json.Unmarshal([]byte(out), &plans)).To(Succeed(), out)
	g.Expect(plans).To(HaveLen(1), out)
	var predicted []string
	for _, op := range plans[0].Operations {
		predicted = append(predicted, op.Restarts...)
	}
	g.Expect(predicted).To(HaveLen(3), out)

	start := time.Now()
	mergePatch(g, cc, `{"spec":{"engine":"valkey","version":"8.0.1"}}`)
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		g.Expect(got.Status.Phase).To(Equal(cachev1alpha1.PhaseUpgrading))
		g.Expect(got.Status.CurrentVersion).To(Equal("7.0.15"), "the version changes only when every pod runs it")
	}, limits.PodRestart, 50*time.Millisecond).Should(Succeed())
	capture(g, cc, "upgrading")
	// A scale-up during the upgrade is queued.
	g.Eventually(func(g Gomega) { g.Expect(restartsInOrder(g, ns)).NotTo(BeEmpty()) }, limits.PodRestart, limits.Poll).Should(Succeed())
	mergePatch(g, cc, `{"spec":{"replicas":4}}`)
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getCC(g, cc).Status.Conditions, cachev1alpha1.ConditionQueued)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("replicas 3→4: waits for Upgrade"))
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	capture(g, cc, "upgrading-with-queued-change")

	var upgradedAt time.Time
	g.Eventually(func(g Gomega) {
		done := eventsByReason(g, ns)[cachev1alpha1.EventOperationDone]
		var found bool
		for _, e := range done {
			if strings.HasPrefix(e.Message, "Upgrade") {
				found, upgradedAt = true, eventTime(e)
			}
		}
		g.Expect(found).To(BeTrue())
	}, 2*limits.ClusterReady, limits.Poll).Should(Succeed())
	took := time.Since(start)
	pause := w.longestPause(start, time.Now())

	g.Eventually(func(g Gomega) {
		got := waitReplicating(g, cc)
		g.Expect(got.Status.Nodes).To(HaveLen(4))
		g.Expect(got.Status.CurrentVersion).To(Equal("8.0.1"))
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionQueued)).To(BeNil())
	}, limits.ClusterReady, limits.Poll).Should(Succeed())

	// Order: replicas from the highest ordinal, the old master last.
	order := restartsInOrder(g, ns)
	oldMaster := before.Status.CurrentMaster
	g.Expect(order).To(HaveLen(3), "each pod restarted once: %v", order)
	g.Expect(order[2]).To(Equal(oldMaster), "the master restarts last: %v", order)
	var replicas []string
	for _, p := range []string{"basic-2", "basic-1", "basic-0"} {
		if p != oldMaster {
			replicas = append(replicas, p)
		}
	}
	g.Expect(order[:2]).To(Equal(replicas), "replicas from the highest ordinal")
	g.Expect(order).To(Equal(predicted), "the restarts kubectl cache plan predicted")
	g.Expect(eventsByReason(g, ns)[cachev1alpha1.EventSwitchover]).NotTo(BeEmpty())
	for name, uid := range uids {
		p := pod(g, ns, name)
		g.Expect(p.UID).NotTo(Equal(uid), "%s was restarted", name)
		g.Expect(p.Annotations[cachev1alpha1.AnnotationVersion]).To(Equal("8.0.1"))
		g.Expect(p.Annotations[cachev1alpha1.AnnotationEngine]).To(Equal("valkey"))
		g.Expect(serverOf(g, ns, "basic", name)).To(Equal("valkey 8.0.1"), "%s runs the real valkey-server", name)
	}
	// The queued scale-up ran after the upgrade.
	g.Expect(pod(g, ns, "basic-3").CreationTimestamp.Time).To(BeTemporally(">=", upgradedAt.Add(-time.Second)))

	noUnreadableMaster(t, g, ns)

	t.Logf("3-pod migration redis 7.0.15 → valkey 8.0.1 took %s, longest write pause %s", took.Round(time.Millisecond), pause.Round(time.Millisecond))
	w.finish(t, g, masters)

	// Going back to Redis once the master runs Valkey: refused, nothing
	// restarts, the StatefulSet keeps Valkey.
	uids = podUIDs(g, ns)
	mergePatch(g, cc, `{"spec":{"engine":"redis","version":"7.0.15"}}`)
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getCC(g, cc).Status.Conditions, cachev1alpha1.ConditionStalled)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonDowngradeRefused))
		g.Expect(c.Message).To(ContainSubstring("Going back from valkey 8.0.1 to redis 7.0.15 is refused"))
		g.Expect(c.Message).To(ContainSubstring("restore a backup taken before the migration"))
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
	g.Expect(eventsByReason(g, ns)[cachev1alpha1.EventChangeRefused]).NotTo(BeEmpty())
	got := getCC(g, cc)
	g.Expect(got.Status.Operation).To(BeNil())
	g.Expect(got.Status.Rollout.Engine).To(Equal(cachev1alpha1.EngineValkey))
	sts := &appsv1.StatefulSet{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "basic"}, sts)).To(Succeed())
	g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal("valkey/valkey:8.0.1"), "the StatefulSet keeps valkey")
	g.Expect(podUIDs(g, ns)).To(Equal(uids), "no pod restarted")
	g.Expect(restartsInOrder(g, ns)).To(HaveLen(3), "no restart after the migration's three")
}

// serverOf is what a pod of a cluster says it runs: "redis 7.0.15" or
// "valkey 8.0.1" (INFO server).
func serverOf(g Gomega, ns, cluster, name string) string {
	rc := redisAt(pod(g, ns, name).Status.PodIP, password(g, ns, cluster))
	defer rc.Close()
	info, err := rc.Info(context.Background(), "server").Result()
	g.Expect(err).NotTo(HaveOccurred())
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = v
		}
	}
	if fields["server_name"] == "valkey" {
		return "valkey " + fields["valkey_version"]
	}
	return "redis " + fields["redis_version"]
}

// noUnreadableMaster: no pod of the namespace ever tried to load or
// replicate RDB data of a format it cannot read (every container run's
// log is kept).
func noUnreadableMaster(t *testing.T, g Gomega, ns string) {
	logs, err := filepath.Glob(filepath.Join(env.PodLogDir(), ns+"_*_redis.log"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(logs).NotTo(BeEmpty())
	for _, l := range logs {
		data, err := os.ReadFile(l)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(data)).NotTo(ContainSubstring("Can't handle RDB format version"), "%s", l)
	}
	t.Logf("no \"Can't handle RDB format version\" in %d pod logs", len(logs))
}

// An image that cannot run here fails the pre-check: no pod restarts, the
// status says why; fixing spec resumes.
func TestFailingPrecheckTouchesNothing(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-precheck")
	cc := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	waitReplicating(g, cc)
	uids := podUIDs(g, ns)

	mergePatch(g, cc, `{"spec":{"image":"registry.invalid/redis:7.2.4"}}`)
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getCC(g, cc).Status.Conditions, cachev1alpha1.ConditionStalled)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonUpgradePrecheckFailed))
		g.Expect(c.Message).To(ContainSubstring("registry.invalid/redis:7.2.4"))
		g.Expect(c.Message).To(ContainSubstring("No pod was restarted"))
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
	capture(g, cc, "stalled-precheck-failed")
	g.Expect(podUIDs(g, ns)).To(Equal(uids), "no pod restarted")
	sts := &appsv1.StatefulSet{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, sts)).To(Succeed())
	g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal("redis:7.0.15"), "the StatefulSet keeps the running template")
	g.Eventually(func() bool {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic-precheck"}, &corev1.Pod{})
		return apierrors.IsNotFound(err)
	}, limits.Cleanup, limits.Poll).Should(BeTrue(), "the pre-check pod is removed")
	g.Expect(restartsInOrder(g, ns)).To(BeEmpty())

	// Fixing spec resumes.
	mergePatch(g, cc, `{"spec":{"image":null,"engine":"valkey","version":"8.0.1"}}`)
	g.Eventually(func(g Gomega) {
		got := waitReplicating(g, cc)
		g.Expect(got.Status.CurrentVersion).To(Equal("8.0.1"))
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionStalled)).To(BeNil())
	}, 2*limits.ClusterReady, limits.Poll).Should(Succeed())
}

// The pre-check runs the new version with the new configuration on a copy
// of a replica's data: a configuration the data does not fit (databases 4
// while a key lives in database 9, which valkey-server refuses at start)
// fails it, though the same pod on an empty folder would start. No pod
// restarts, the status and an Event quote the server; reverting the
// configuration lets the migration run, its pre-check holding every key
// of the copy.
func TestPrecheckOnACopyOfTheDataRefusesAConfigurationThatDoesNotFit(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := "e2e-precheck-data"
	cc, _, w, masters := underLoad(t, g, ns)
	uids := podUIDs(g, ns)
	master := getCC(g, cc).Status.CurrentMaster
	base := redisAt(pod(g, ns, master).Status.PodIP, password(g, ns, "basic"))
	opts := *base.Options()
	base.Close()
	opts.DB, opts.PoolSize = 9, 1
	rc := redis.NewClient(&opts)
	defer rc.Close()
	g.Expect(rc.Set(ctx, "in-database-9", "x", 0).Err()).To(Succeed())
	g.Expect(rc.Do(ctx, "WAIT", "2", "5000").Int()).To(Equal(2), "both replicas hold the key in database 9")

	mergePatch(g, cc, `{"spec":{"engine":"valkey","version":"8.0.1","config":{"databases":"4"}}}`)
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getCC(g, cc).Status.Conditions, cachev1alpha1.ConditionStalled)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonUpgradePrecheckFailed))
		g.Expect(c.Message).To(ContainSubstring("configured to handle more than 4 databases"))
		g.Expect(c.Message).To(ContainSubstring("No pod was restarted"))
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
	capture(g, cc, "stalled-precheck-data")
	t.Logf("stalled: %s", meta.FindStatusCondition(getCC(g, cc).Status.Conditions, cachev1alpha1.ConditionStalled).Message)
	failed := eventsByReason(g, ns)[cachev1alpha1.EventPrecheckFailed]
	g.Expect(failed).To(ContainElement(HaveField("Message", ContainSubstring("more than 4 databases"))))
	g.Expect(podUIDs(g, ns)).To(Equal(uids), "no pod restarted")
	sts := &appsv1.StatefulSet{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, sts)).To(Succeed())
	g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal("redis:7.0.15"), "the StatefulSet keeps the running template")
	g.Expect(restartsInOrder(g, ns)).To(BeEmpty())
	for name := range uids {
		g.Expect(serverOf(g, ns, "basic", name)).To(Equal("redis 7.0.15"), name)
	}

	// Without the databases change the copy loads whole and the
	// migration runs.
	mergePatch(g, cc, `{"spec":{"config":null}}`)
	g.Eventually(func(g Gomega) {
		got := waitReplicating(g, cc)
		g.Expect(got.Status.CurrentVersion).To(Equal("8.0.1"))
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionStalled)).To(BeNil())
	}, 2*limits.ClusterReady, limits.Poll).Should(Succeed())
	passed := eventsByReason(g, ns)[cachev1alpha1.EventPrecheckPassed]
	g.Expect(passed).To(ContainElement(HaveField("Message", MatchRegexp(`valkey 8\.0\.1 starts with the configuration on a copy of the data of 10\.[0-9.]+:6379 and holds its [0-9]+ keys in database 0`))))
	for _, e := range passed {
		t.Logf("pre-check: %s", e.Message)
	}
	// Each pod that came back as a replica was read: a sample of the
	// master's keys, on the replica once it reached the master's offset.
	checked := map[string]bool{}
	for _, e := range eventsByReason(g, ns)[cachev1alpha1.EventDataChecked] {
		name, _, _ := strings.Cut(e.Message, " ")
		checked[name] = true
		t.Logf("data check: %s", e.Message)
	}
	g.Expect(checked).To(HaveLen(3), "a data check of every restarted pod")
	g.Expect(eventsByReason(g, ns)[cachev1alpha1.EventDataCheckFailed]).To(BeEmpty())
	w.finish(t, g, masters)
}

// refusingImage runs the real valkey-server 8.0.1 only in a pre-check pod
// (its hostname is the pod's name, <cluster>-precheck): it passes the
// pre-check, copy of the data included, and fails on the cluster's pods,
// as a Valkey pod that does not come up mid-migration would.
const refusingImage = "cacheops-e2e/valkey-refuses-old-data:8.0.1"

func refusingImageScript(dir string) (string, error) {
	path := filepath.Join(dir, "valkey-refuses-old-data")
	script := `#!/bin/sh
case "$(hostname)" in
  *-precheck) exec /usr/bin/valkey-server "$@" ;;
esac
echo "this valkey-server starts only in a pre-check pod" >&2
exit 1
`
	return path, os.WriteFile(path, []byte(script), 0o755)
}

// A Valkey pod that does not come up mid-migration, before the master
// moved: the migration rolls back to Redis; the status says why, spec is
// left alone, no acknowledged write is lost.
func TestUpgradeRollsBackWhenAPodDoesNotComeBack(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := "e2e-rollback"
	cc, before, w, masters := underLoad(t, g, ns)

	mergePatch(g, cc, fmt.Sprintf(`{"spec":{"engine":"valkey","version":"8.0.1","image":%q}}`, refusingImage))
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		c := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionStalled)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonUpgradeRolledBack))
		g.Expect(c.Message).To(ContainSubstring("did not become ready and in sync"))
		g.Expect(got.Status.Operation).To(BeNil())
		g.Expect(got.Spec.Image).To(Equal(refusingImage), "spec is left alone")
	}, 2*limits.ClusterReady, limits.Poll).Should(Succeed())
	capture(g, cc, "stalled-rolled-back")
	g.Expect(eventsByReason(g, ns)[cachev1alpha1.EventRolledBack]).NotTo(BeEmpty())

	// Every pod runs the previous image again and the cluster serves.
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.HasLabels{cachev1alpha1.LabelCluster})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(3))
		for _, p := range pods.Items {
			g.Expect(p.Spec.Containers[0].Image).To(Equal("redis:7.0.15"), p.Name)
			g.Expect(p.Status.ContainerStatuses).NotTo(BeEmpty())
			g.Expect(p.Status.ContainerStatuses[0].Ready).To(BeTrue(), p.Name)
		}
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
	g.Expect(getCC(g, cc).Status.CurrentMaster).To(Equal(before.Status.CurrentMaster), "the master was never touched")
	for _, name := range []string{"basic-0", "basic-1", "basic-2"} {
		g.Expect(serverOf(g, ns, "basic", name)).To(Equal("redis 7.0.15"), name)
	}
	w.finish(t, g, masters)
}

// A parameter Redis changes live is set on every pod without a restart; a
// restart-only one rolls the pods in order.
func TestConfigurationChanges(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-config")
	cc := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	waitReplicating(g, cc)
	pw := password(g, ns, "basic")
	pids := redisPIDs(g, ns, "basic", 3)

	mergePatch(g, cc, `{"spec":{"config":{"maxmemory":"100mb","maxmemory-policy":"allkeys-lru"}}}`)
	g.Eventually(func(g Gomega) {
		for name := range pids {
			g.Expect(configOf(g, ns, name, pw, "maxmemory")).To(Equal("104857600"), name)
			g.Expect(configOf(g, ns, name, pw, "maxmemory-policy")).To(Equal("allkeys-lru"), name)
		}
		got := waitRunning(g, cc)
		g.Expect(got.Status.Operation).To(BeNil())
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
	expectSameProcesses(g, ns, pids, "kept its process")
	g.Expect(eventsByReason(g, ns)[cachev1alpha1.EventConfigApplied]).NotTo(BeEmpty())
	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic-config"}, cm)).To(Succeed())
	g.Expect(cm.Data["redis.conf"]).To(ContainSubstring("maxmemory 100mb"), "pods that start later read it too")
	g.Expect(restartsInOrder(g, ns)).To(BeEmpty())

	// A value admission lets through but Redis refuses: Redis's own words
	// in Stalled (InvalidConfig), and no pod restarts.
	mergePatch(g, cc, `{"spec":{"config":{"maxmemory-clients":"150%"}}}`)
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		stalled := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(cachev1alpha1.ReasonInvalidConfig))
		g.Expect(stalled.Message).To(ContainSubstring("percentage argument must be less or equal to 100"))
		g.Expect(got.Status.Operation).To(BeNil())
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
	expectSameProcesses(g, ns, pids, "was not restarted for a value Redis refuses")
	mergePatch(g, cc, `{"spec":{"config":{"maxmemory-clients":"10%"}}}`)
	g.Eventually(func(g Gomega) {
		for name := range pids {
			g.Expect(configOf(g, ns, name, pw, "maxmemory-clients")).To(Equal("10%"), name)
		}
		got := waitRunning(g, cc)
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionStalled)).To(BeNil())
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
	g.Expect(restartsInOrder(g, ns)).To(BeEmpty())

	// databases only changes at start-up: the pods roll, in order.
	mergePatch(g, cc, `{"spec":{"config":{"databases":"32"}}}`)
	g.Eventually(func(g Gomega) {
		got := waitReplicating(g, cc)
		g.Expect(got.Status.Operation).To(BeNil())
		for name := range pids {
			g.Expect(configOf(g, ns, name, pw, "databases")).To(Equal("32"), name)
			g.Expect(configOf(g, ns, name, pw, "maxmemory")).To(Equal("104857600"), name)
		}
	}, 2*limits.ClusterReady, limits.Poll).Should(Succeed())
	g.Expect(restartsInOrder(g, ns)).To(HaveLen(3))
}

// Sustained memory pressure becomes a recommendation in the status (spec
// untouched) and, through kubectl cache recommend, a commit on a new branch
// of a real git repository.
func TestMemoryPressureBecomesACommit(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-recommend")
	cc := loadExample(t, "basic", ns)
	cc.Spec.Config = map[string]cachev1alpha1.ConfigValue{"maxmemory": "4mb"}
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	got := waitReplicating(g, cc)
	pw := password(g, ns, "basic")

	// Fill the master to above 90% of maxmemory.
	m := redisAt(pod(g, ns, got.Status.CurrentMaster).Status.PodIP, pw)
	defer m.Close()
	value := strings.Repeat("x", 8<<10)
	for i := 0; ; i++ {
		info, err := m.Info(ctx, "memory").Result()
		g.Expect(err).NotTo(HaveOccurred())
		var used, max int64
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				fmt.Sscan(v, &used)
			}
			if v, ok := strings.CutPrefix(line, "maxmemory:"); ok {
				fmt.Sscan(v, &max)
			}
		}
		g.Expect(max).To(Equal(int64(4 << 20)))
		// Well above the 80% mark, so replication buffers draining after
		// the fill do not take it back under.
		if float64(used) > 0.9*float64(max) {
			break
		}
		g.Expect(i).To(BeNumerically("<", 2000), "memory did not fill")
		g.Expect(m.Set(ctx, fmt.Sprintf("fill:%d", i), value, 0).Err()).To(Succeed())
	}

	var rec cachev1alpha1.Recommendation
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		g.Expect(got.Status.Recommendations).To(HaveLen(1))
		rec = got.Status.Recommendations[0]
		g.Expect(got.Spec.Config["maxmemory"]).To(Equal(cachev1alpha1.ConfigValue("4mb")), "spec is never edited")
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	g.Expect(rec.Field).To(Equal("spec.config.maxmemory"))
	g.Expect(rec.Current).To(Equal("4mb"))
	g.Expect(rec.Reason).To(ContainSubstring("stayed above 80% of maxmemory"))
	// Events are sent after the status is written, asynchronously.
	g.Eventually(func(g Gomega) {
		g.Expect(eventsByReason(g, ns)[cachev1alpha1.EventRecommendation]).NotTo(BeEmpty())
	}, limits.PodRestart, limits.Poll).Should(Succeed(), "a CapacityRecommendation Event")

	// kubectl cache recommend turns it into a commit.
	repo := t.TempDir()
	gitIn := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		return strings.TrimSpace(string(out))
	}
	gitIn("init", "-q", "-b", "main")
	manifest := fmt.Sprintf("# team cache\napiVersion: cache.cacheops.io/v1alpha1\nkind: CacheCluster\nmetadata:\n  name: basic\n  namespace: %s\nspec:\n  version: \"7.0.15\"\n  replicas: 3\n  config:\n    maxmemory: 4mb # sized for the pilot\n", ns)
	g.Expect(os.WriteFile(filepath.Join(repo, "basic.yaml"), []byte(manifest), 0o644)).To(Succeed())
	gitIn("add", ".")
	gitIn("commit", "-qm", "basic")
	out := kubectlCache(g, "recommend", "basic", "-n", ns, "--repo", repo, "--path", "basic.yaml", "--branch", "cacheops/basic-memory", "--no-push")
	g.Expect(out).To(ContainSubstring("on branch cacheops/basic-memory"))
	g.Expect(gitIn("log", "-1", "--format=%B")).To(ContainSubstring("Evidence: " + rec.Reason))
	edited, err := os.ReadFile(filepath.Join(repo, "basic.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(edited)).To(ContainSubstring("maxmemory: " + rec.Recommended))
	g.Expect(string(edited)).To(ContainSubstring("# team cache"))
}
