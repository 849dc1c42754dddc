//go:build e2e

package argocd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/test/argocd"
)

// Two teams, each with an Application syncing its own folder of the
// repository into its own namespace: team-a runs examples/basic.yaml (three
// pods), team-b a one-pod cluster from examples/single.yaml.
const (
	appA, appB   = "team-a", "team-b"
	pathA, pathB = "teams/a", "teams/b"
	nsA, nsB     = "team-a", "team-b"
)

// example reads a file of examples/ and sets its namespace.
func example(t *testing.T, name, ns string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Replace(string(b), "namespace: default", "namespace: "+ns, 1)
}

// The platform team's workflow, in order: each step starts from the state
// the one before left, as a repository's history would.
func TestArgoCDSyncsCacheClustersFromGit(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	suiteStart := time.Now()

	git, err := argocd.InitRepo(filepath.Join(t.TempDir(), "gitops"))
	g.Expect(err).NotTo(HaveOccurred())
	basic := example(t, "basic.yaml", nsA)
	g.Expect(git.Write(pathA+"/basic.yaml", basic)).To(Succeed())
	g.Expect(git.Write(pathA+"/README.md", "team a's caches\n")).To(Succeed())
	g.Expect(git.Write(pathB+"/preview.yaml", example(t, "single.yaml", nsB))).To(Succeed())
	first, err := git.Commit("team-a: basic, team-b: preview")
	g.Expect(err).NotTo(HaveOccurred())

	basicKey := client.ObjectKey{Namespace: nsA, Name: "basic"}
	previewKey := client.ObjectKey{Namespace: nsB, Name: "preview"}

	t.Run("a new Application syncs a CacheCluster and ends Synced and Healthy through health.lua", func(t *testing.T) {
		g := NewWithT(t)
		for _, ns := range []string{nsA, nsB} {
			g.Expect(k8s.Create(ctx, namespace(ns))).To(Succeed())
		}
		start := time.Now()
		for _, s := range []argocd.AppSpec{
			{Name: appA, RepoURL: git.URL(), Path: pathA, DestinationNamespace: nsA},
			{Name: appB, RepoURL: git.URL(), Path: pathB, DestinationNamespace: nsB},
		} {
			g.Expect(k8s.Create(ctx, argocd.Application(s))).To(Succeed())
		}
		st := waitSyncedHealthy(g, appA, first)
		t.Logf("measured: Application created → %s Synced/Healthy in %s", appA, argocd.Since(start))
		waitSyncedHealthy(g, appB, first)
		t.Logf("measured: Application created → %s Synced/Healthy in %s", appB, argocd.Since(start))

		// The health came from the shipped script: Argo CD has no built-in
		// check for CacheCluster, and the script's message is persisted.
		res := resource(g, st, "CacheCluster", "basic")
		g.Expect(res.Health).To(Equal("Healthy"))
		g.Expect(res.HealthMessage).NotTo(BeEmpty())
		t.Logf("CacheCluster health from health.lua: %s: %q", res.Health, res.HealthMessage)
		cc := waitRunning(g, basicKey)
		g.Expect(cc.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
		waitRunning(g, previewKey)
	})

	var second string
	t.Run("a commit changing replicas 3→4 is planned, goes Progressing, then Healthy, never Degraded", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(git.Write(pathA+"/basic.yaml", strings.Replace(basic, "replicas: 3", "replicas: 4", 1))).To(Succeed())
		second, err = git.Commit("team-a: basic to 4 replicas")
		g.Expect(err).NotTo(HaveOccurred())

		// The pull request's plan, between the two commits. It is given the
		// manifest, not the folder: plan reads every file of a folder as a
		// manifest, README.md included.
		plan := exec.Command(cliBin, "plan", "--base", first, "--head", second, pathA+"/basic.yaml")
		plan.Dir = git.Dir
		out, err := plan.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		t.Logf("kubectl cache plan:\n%s", out)
		g.Expect(string(out)).To(ContainSubstring("CacheCluster team-a/basic: changed"))
		g.Expect(string(out)).To(ContainSubstring("Scaling: replicas 3→4"))

		start := time.Now()
		g.Expect(argocd.Refresh(ctx, k8s, appA, true)).To(Succeed())
		seen := map[string]bool{}
		var degraded []string
		g.Eventually(func(g Gomega) {
			st, err := argocd.GetStatus(ctx, k8s, appA)
			g.Expect(err).NotTo(HaveOccurred())
			seen[st.Health] = true
			if st.Health == "Degraded" {
				degraded = append(degraded, st.HealthMessage)
			}
			g.Expect(st.Revision).To(Equal(second))
			g.Expect(st.Sync).To(Equal("Synced"))
			g.Expect(st.Health).To(Equal("Healthy"))
			g.Expect(seen["Progressing"]).To(BeTrue(), "the Application went Healthy without being seen Progressing")
		}, limits.Synced, limits.Poll).Should(Succeed())
		t.Logf("measured: commit replicas 3→4 → Synced/Healthy in %s (health seen: %v)", argocd.Since(start), keys(seen))
		g.Expect(degraded).To(BeEmpty(), "the Application was Degraded on the way")
		cc := waitRunning(g, basicKey)
		g.Expect(cc.Status.ReadyReplicas).To(BeEquivalentTo(4))
	})

	t.Run("after settling, repeated refreshes find nothing to sync", func(t *testing.T) {
		g := NewWithT(t)
		before, err := argocd.GetStatus(ctx, k8s, appA)
		g.Expect(err).NotTo(HaveOccurred())
		cc := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(ctx, basicKey, cc)).To(Succeed())
		rv := cc.ResourceVersion
		start := time.Now()
		const refreshes = 5
		for i := range refreshes {
			g.Expect(argocd.Refresh(ctx, k8s, appA, i%2 == 0)).To(Succeed())
			g.Eventually(func(g Gomega) {
				st, err := argocd.GetStatus(ctx, k8s, appA)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(st.Refreshing).To(BeFalse())
			}, limits.Synced, limits.Poll).Should(Succeed())
			st, err := argocd.GetStatus(ctx, k8s, appA)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Sync).To(Equal("Synced"), "refresh %d found a diff", i+1)
			g.Expect(st.Health).To(Equal("Healthy"))
			// No new sync operation ran: self-heal would have started one for
			// any diff.
			g.Expect(st.StartedAt).To(Equal(before.StartedAt), "refresh %d started a sync", i+1)
			g.Expect(st.History).To(Equal(before.History))
		}
		g.Expect(k8s.Get(ctx, basicKey, cc)).To(Succeed())
		t.Logf("measured: %d refreshes in %s; the CacheCluster's resourceVersion moved: %t (%s → %s)",
			refreshes, argocd.Since(start), cc.ResourceVersion != rv, rv, cc.ResourceVersion)
	})

	t.Run("a commit refused at admission shows the API server's message; the neighbour is untouched", func(t *testing.T) {
		g := NewWithT(t)
		neighbour := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(ctx, previewKey, neighbour)).To(Succeed())
		bad := strings.Replace(basic, "replicas: 3", "replicas: 4\n  config:\n    maxmemory: \"\"", 1)
		g.Expect(git.Write(pathA+"/basic.yaml", bad)).To(Succeed())
		badRev, err := git.Commit("team-a: an empty maxmemory")
		g.Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		g.Expect(argocd.Refresh(ctx, k8s, appA, true)).To(Succeed())
		// The refusal shows either as the failed sync operation of the bad
		// revision or, when server-side diff's dry run meets it first, as a
		// comparison error; both carry the API server's message.
		const refusal = "config maxmemory has an empty value"
		var st argocd.AppStatus
		g.Eventually(func(g Gomega) {
			st, err = argocd.GetStatus(ctx, k8s, appA)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Sync).NotTo(Equal("Synced"))
			g.Expect(refusalIn(st)).To(ContainSubstring(refusal))
		}, limits.Synced, limits.Poll).Should(Succeed(), func() string { return describe(st) })
		t.Logf("measured: bad commit → refusal in the Application in %s: sync %s; operation %s at %s: %q; conditions %q",
			argocd.Since(start), st.Sync, st.OperationPhase, st.OperationRevision, st.OperationMessage, st.Conditions)
		if st.OperationRevision == badRev {
			g.Expect(st.OperationPhase).To(BeElementOf("Failed", "Error"))
		}

		cc := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(ctx, basicKey, cc)).To(Succeed())
		g.Expect(cc.Spec.Config).To(BeEmpty(), "the refused spec reached the cluster")
		after := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(ctx, previewKey, after)).To(Succeed())
		g.Expect(after.Generation).To(Equal(neighbour.Generation))
		nb, err := argocd.GetStatus(ctx, k8s, appB)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nb.Sync).To(Equal("Synced"))
		g.Expect(nb.Health).To(Equal("Healthy"))

		// The fix is the next commit.
		g.Expect(git.Write(pathA+"/basic.yaml", strings.Replace(basic, "replicas: 3", "replicas: 4", 1))).To(Succeed())
		fixed, err := git.Commit("team-a: revert the empty maxmemory")
		g.Expect(err).NotTo(HaveOccurred())
		start = time.Now()
		g.Expect(argocd.Refresh(ctx, k8s, appA, true)).To(Succeed())
		waitSyncedHealthy(g, appA, fixed)
		t.Logf("measured: fixing commit → Synced/Healthy in %s", argocd.Since(start))
	})

	t.Run("removing the file from git with prune deletes the CacheCluster", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(git.Remove(pathA + "/basic.yaml")).To(Succeed())
		rev, err := git.Commit("team-a: remove basic")
		g.Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		g.Expect(argocd.Refresh(ctx, k8s, appA, true)).To(Succeed())
		g.Eventually(func(g Gomega) {
			err := k8s.Get(ctx, basicKey, &cachev1alpha1.CacheCluster{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "CacheCluster basic still exists: %v", err)
		}, limits.Removed, limits.Poll).Should(Succeed())
		t.Logf("measured: removing commit → CacheCluster gone in %s", argocd.Since(start))
		waitSyncedHealthy(g, appA, rev)
		t.Logf("measured: removing commit → Synced/Healthy in %s", argocd.Since(start))
		waitRunning(g, previewKey)
	})

	t.Logf("measured: the workflow took %s", argocd.Since(suiteStart))
}

// waitSyncedHealthy waits until the Application has synced revision rev
// and is Healthy, and returns its status.
func waitSyncedHealthy(g Gomega, app, rev string) argocd.AppStatus {
	var st argocd.AppStatus
	g.Eventually(func(g Gomega) {
		var err error
		st, err = argocd.GetStatus(context.Background(), k8s, app)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Revision).To(Equal(rev))
		g.Expect(st.Sync).To(Equal("Synced"))
		g.Expect(st.Health).To(Equal("Healthy"))
	}, limits.Synced, limits.Poll).Should(Succeed(), func() string {
		return "Application " + app + " never became Synced and Healthy at " + rev + ": " + describe(st)
	})
	return st
}

// waitRunning waits until the CacheCluster is Running with Ready=True.
func waitRunning(g Gomega, key client.ObjectKey) *cachev1alpha1.CacheCluster {
	got := &cachev1alpha1.CacheCluster{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), key, got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(cachev1alpha1.PhaseRunning))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionReady)).To(BeTrue())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}, limits.Synced, limits.Poll).Should(Succeed(), "CacheCluster "+key.String()+" never became Running and Ready")
	return got
}

func resource(g Gomega, st argocd.AppStatus, kind, name string) argocd.Resource {
	for _, r := range st.Resources {
		if r.Kind == kind && r.Name == name {
			return r
		}
	}
	g.Expect(st.Resources).To(ContainElement(HaveField("Name", name)), "no %s %s in the Application's resources", kind, name)
	return argocd.Resource{}
}

// refusalIn gathers the messages of an Application's status that can carry
// an admission refusal: the sync operation's, the conditions', the
// resources'.
func refusalIn(st argocd.AppStatus) string {
	parts := append([]string{st.OperationMessage}, st.Conditions...)
	for _, r := range st.Resources {
		parts = append(parts, r.HealthMessage)
	}
	return strings.Join(parts, "\n")
}

func describe(st argocd.AppStatus) string {
	return "sync " + st.Sync + " at " + st.Revision + ", health " + st.Health + " (" + st.HealthMessage +
		"), operation " + st.OperationPhase + " at " + st.OperationRevision + ": " + st.OperationMessage +
		", conditions " + strings.Join(st.Conditions, "; ")
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
