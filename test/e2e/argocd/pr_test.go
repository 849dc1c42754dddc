//go:build e2e

package argocd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cacheops/cacheops/test/argocd"
)

// drift: someone scales basic 3→4 by hand (kubectl scale, the scale
// subresource); team-a's Application has no self-heal, so it stays. A pull
// request 3→2 reads as "3→2" in git, but with --live the plan starts from
// the 4 pods that run, names the drift, and merging it removes two pods.
func (w *workflow) drift(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	kubectl := exec.Command(filepath.Join(binDir, "kubectl"), "scale", "cachecluster", "basic", "-n", nsA, "--replicas=4")
	kubectl.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig())
	out, err := kubectl.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Eventually(func(g Gomega) {
		cc := waitRunning(g, basicKey)
		g.Expect(cc.Status.ReadyReplicas).To(BeEquivalentTo(4))
	}, limits.Synced, limits.Poll).Should(Succeed())
	g.Expect(pods(g, basicKey)).To(HaveLen(4))
	// Argo CD sees the live change, and leaves it.
	g.Expect(argocd.Refresh(ctx, k8s, appA, false)).To(Succeed())
	g.Eventually(func(g Gomega) {
		st, err := argocd.GetStatus(ctx, k8s, appA)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Sync).To(Equal("OutOfSync"))
	}, limits.Synced, limits.Poll).Should(Succeed())

	// The pull request, planned before it merges.
	pr := filepath.Join(t.TempDir(), "basic.yaml")
	g.Expect(os.WriteFile(pr, []byte(basic(t, 2, "")), 0o644)).To(Succeed())
	gitOnly := w.plan(g, "--base", w.revs["install"], "--head", pr, fileA)
	t.Logf("kubectl cache plan (git only):\n%s", gitOnly)
	g.Expect(gitOnly).To(ContainSubstring("Scaling: replicas 3→2"))
	live := w.plan(g, "--live", "--base", w.revs["install"], "--head", pr, fileA)
	t.Logf("kubectl cache plan --live:\n%s", live)
	g.Expect(live).To(ContainSubstring("DRIFT    the live spec differs from --base; this plan starts from the live spec:\n             spec.replicas: 4 live, 3 in git\n"))
	g.Expect(live).To(ContainSubstring("Scaling: replicas 4→2"))
	noBase := w.plan(g, "--live", "--head", pr)
	g.Expect(noBase).To(ContainSubstring("Scaling: replicas 4→2"))
	g.Expect(noBase).NotTo(ContainSubstring("DRIFT"))

	g.Expect(w.git.Write(fileA, basic(t, 2, ""))).To(Succeed())
	rev, err := w.git.Commit("team-a: basic to 2 replicas")
	g.Expect(err).NotTo(HaveOccurred())
	took := watchCommit(t, g, appA, rev)
	t.Logf("measured: commit replicas 3→2 (4 live) → Synced/Healthy in %s", took)
	cc := waitRunning(g, basicKey)
	g.Expect(cc.Status.ReadyReplicas).To(BeEquivalentTo(2))
	g.Eventually(func(g Gomega) { g.Expect(pods(g, basicKey)).To(HaveLen(2)) }, limits.Removed, limits.Poll).Should(Succeed(), "two of the four pods removed")
	g.Expect(pods(g, basicKey)).To(HaveKey("basic-0"))
	g.Expect(pods(g, basicKey)).To(HaveKey("basic-1"))
	w.revs["two"] = rev
}

// restartCommit is the commit of the rolling-restart step. No second
// Redis version runs here yet (the version table of issue 16 maps only
// redis:7.0.15 and valkey/valkey:8.0.1 to real servers), so it changes a
// parameter Redis reads only at start, which day-two rolls out exactly as
// a version: pod by pod, replicas first, a switchover before the master.
// For a real upgrade, set config to "" and edit to change version (and
// engine), and wantPlan to the plan's "Upgrade: version …" line.
var restartCommit = struct {
	message, config, wantPlan string
	// check reads, on each pod, what the commit changed.
	check func(g Gomega, rc *redis.Client)
}{
	message:  "team-a: basic with 32 databases",
	config:   `databases: "32"`,
	wantPlan: "Upgrade: parameters that need a restart: rolling restart — 2 pod restarts",
	check: func(g Gomega, rc *redis.Client) {
		got, err := rc.ConfigGet(context.Background(), "databases").Result()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(HaveKeyWithValue("databases", "32"))
	},
}

func (w *workflow) rollingRestart(t *testing.T) {
	g := NewWithT(t)
	before := pods(g, basicKey)
	g.Expect(before).To(HaveLen(2))
	c := restartCommit
	g.Expect(w.git.Write(fileA, basic(t, 2, c.config))).To(Succeed())
	rev, err := w.git.Commit(c.message)
	g.Expect(err).NotTo(HaveOccurred())
	plan := w.plan(g, "--live", "--base", w.revs["two"], "--head", rev, fileA)
	t.Logf("kubectl cache plan --live:\n%s", plan)
	g.Expect(plan).To(ContainSubstring(c.wantPlan))
	g.Expect(plan).NotTo(ContainSubstring("DRIFT"))

	took := watchCommit(t, g, appA, rev)
	t.Logf("measured: commit %q → Synced/Healthy in %s", c.message, took)
	waitRunning(g, basicKey)
	w.config = c.config
	w.revs["restart"] = rev
	after := pods(g, basicKey)
	g.Expect(after).To(HaveLen(2))
	pw := password(g, nsA, "basic")
	for name, p := range after {
		g.Expect(p.UID).NotTo(Equal(before[name].UID), "pod %s was not restarted", name)
		rc := redis.NewClient(&redis.Options{Addr: p.Status.PodIP + ":6379", Password: pw})
		c.check(g, rc)
		rc.Close()
	}
}

func (w *workflow) scaleUp(t *testing.T) {
	g := NewWithT(t)
	g.Expect(w.git.Write(fileA, basic(t, 4, w.config))).To(Succeed())
	rev, err := w.git.Commit("team-a: basic to 4 replicas")
	g.Expect(err).NotTo(HaveOccurred())
	plan := w.plan(g, "--live", "--base", w.revs["restart"], "--head", rev, fileA)
	t.Logf("kubectl cache plan --live:\n%s", plan)
	g.Expect(plan).To(ContainSubstring("CacheCluster team-a/basic: changed"))
	g.Expect(plan).NotTo(ContainSubstring("DRIFT"))
	g.Expect(plan).To(ContainSubstring("Scaling: replicas 2→4"))

	took := watchCommit(t, g, appA, rev)
	t.Logf("measured: commit replicas 2→4 → Synced/Healthy in %s", took)
	cc := waitRunning(g, basicKey)
	g.Expect(cc.Status.ReadyReplicas).To(BeEquivalentTo(4))
	w.revs["four"] = rev
}

// migrate commits the version change platform teams make now: Redis
// 7.0.15 to Valkey 8.0.1 (real servers on the process-backed nodes). The
// plan names the order and the point of no return; Argo CD shows
// Progressing while day-two migrates pod by pod, then Healthy; every pod
// then runs Valkey and every key written before is still there.
func (w *workflow) migrate(t *testing.T) {
	g := NewWithT(t)
	before := pods(g, basicKey)
	g.Expect(before).To(HaveLen(4))
	pw := password(g, nsA, "basic")
	cc := waitRunning(g, basicKey)
	var master string
	for name := range before {
		if name == cc.Status.CurrentMaster {
			master = name
		}
	}
	g.Expect(master).NotTo(BeEmpty())
	mc := redis.NewClient(&redis.Options{Addr: before[master].Status.PodIP + ":6379", Password: pw})
	for i := 0; i < 200; i++ {
		g.Expect(mc.Set(context.Background(), fmt.Sprintf("migrate:%d", i), i, 0).Err()).To(Succeed())
	}
	g.Expect(mc.Wait(context.Background(), 3, 5*time.Second).Val()).To(BeEquivalentTo(3), "every replica holds the keys before the commit")
	mc.Close()

	w.valkey = true
	g.Expect(w.git.Write(fileA, w.basic(t, 4, w.config))).To(Succeed())
	rev, err := w.git.Commit("team-a: basic on Valkey 8.0.1")
	g.Expect(err).NotTo(HaveOccurred())
	plan := w.plan(g, "--live", "--base", w.revs["four"], "--head", rev, fileA)
	t.Logf("kubectl cache plan --live:\n%s", plan)
	g.Expect(plan).To(ContainSubstring("Upgrade: engine redis 7.0.15→valkey 8.0.1: rolling restart; no rollback after the switchover"))
	g.Expect(plan).To(ContainSubstring("4 pod restarts"))
	g.Expect(plan).NotTo(ContainSubstring("DRIFT"))

	took := watchCommit(t, g, appA, rev)
	t.Logf("measured: commit Redis 7.0.15 → Valkey 8.0.1 (4 pods) → Synced/Healthy in %s", took)
	waitRunning(g, basicKey)
	after := pods(g, basicKey)
	g.Expect(after).To(HaveLen(4))
	for name, p := range after {
		g.Expect(p.UID).NotTo(Equal(before[name].UID), "pod %s was not restarted", name)
		rc := redis.NewClient(&redis.Options{Addr: p.Status.PodIP + ":6379", Password: pw})
		info, err := rc.Info(context.Background(), "server").Result()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info).To(ContainSubstring("server_name:valkey"), name)
		n, err := rc.Exists(context.Background(), "migrate:0", "migrate:199").Result()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(BeEquivalentTo(2), "%s holds the keys written before the migration", name)
		rc.Close()
	}
	w.revs["valkey"] = rev
}

// password is a cluster's generated password.
func password(g Gomega, ns, name string) string {
	s := &corev1.Secret{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + "-auth"}, s)).To(Succeed())
	return string(s.Data["password"])
}
