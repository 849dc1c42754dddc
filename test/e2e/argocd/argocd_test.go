//go:build e2e

package argocd

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
// pods), team-b a one-pod cluster from examples/single.yaml. A root
// Application (app of apps) syncs the folder apps/: the AppProject and the
// operator's Application (charts/cacheops, copied into the repository)
// before the teams' Applications.
const (
	appRoot, appOperator = "cacheops-root", "cacheops-operator"
	appA, appB           = "team-a", "team-b"
	pathA, pathB         = "teams/a", "teams/b"
	nsA, nsB             = "team-a", "team-b"
	nsOperator           = "cacheops-system"
	fileA, fileB         = pathA + "/basic.yaml", pathB + "/preview.yaml"
)

// workflow is the state one step leaves to the next, as a repository's
// history would.
type workflow struct {
	git *argocd.Repo
	// revs are the commits by what they did.
	revs map[string]string
	// config is team-a's basic spec.config block, kept through the steps.
	config string
	// valkey: team-a's basic was migrated to Valkey 8.0.1 (kept through
	// the steps after that).
	valkey bool
}

// basic is team-a's manifest as the steps so far left it.
func (w *workflow) basic(t *testing.T, replicas int, config string) string {
	m := basic(t, replicas, config)
	if w.valkey {
		m = strings.Replace(m, `version: "7.0.15"`, "engine: valkey\n  version: \"8.0.1\"", 1)
	}
	return m
}

var (
	basicKey   = client.ObjectKey{Namespace: nsA, Name: "basic"}
	previewKey = client.ObjectKey{Namespace: nsB, Name: "preview"}
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

// basic is team-a's manifest with replicas pods and the config block
// (indented under spec.config), if any.
func basic(t *testing.T, replicas int, config string) string {
	m := strings.Replace(example(t, "basic.yaml", nsA), "replicas: 3", fmt.Sprintf("replicas: %d", replicas), 1)
	if config != "" {
		m += "  config:\n    " + strings.ReplaceAll(strings.TrimSpace(config), "\n", "\n    ") + "\n"
	}
	return m
}

// The platform team's workflow, in order: each step starts from the state
// the one before left.
func TestArgoCDSyncsCacheClustersFromGit(t *testing.T) {
	g := NewWithT(t)
	suiteStart := time.Now()
	git, err := argocd.InitRepo(filepath.Join(t.TempDir(), "gitops"))
	g.Expect(err).NotTo(HaveOccurred())
	w := &workflow{git: git, revs: map[string]string{}}

	steps := []struct {
		name string
		run  func(*testing.T)
	}{
		{"an app of apps installs the operator (CRDs first) and the teams' clusters; all end Synced and Healthy", w.install},
		{"a cluster scaled outside git: the plan starts from the live spec and says so; merging removes two pods", w.drift},
		{"a rolling-restart commit is planned, goes Progressing, then Healthy, never Degraded", w.rollingRestart},
		{"a commit changing replicas 2→4 is planned, goes Progressing, then Healthy, never Degraded", w.scaleUp},
		{"a version commit, Redis 7.0.15 → Valkey 8.0.1, is planned, goes Progressing, then Healthy, never Degraded", w.migrate},
		{"in the steady state, resyncs find nothing to sync and the operator writes nothing", w.steady},
		{"a commit refused at admission shows the API server's message; the neighbour is untouched", w.refused},
		{"a recommendation becomes a pushed branch; merging it is the next sync", w.recommend},
		{"removing the file from git with prune deletes the CacheCluster", w.prune},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			break // the next steps start from this one's state
		}
	}
	t.Logf("measured: the workflow took %s", argocd.Since(suiteStart))
}

func (w *workflow) refused(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	neighbour := &cachev1alpha1.CacheCluster{}
	g.Expect(k8s.Get(ctx, previewKey, neighbour)).To(Succeed())
	bad := w.basic(t, 4, w.config+"\nmaxmemory: \"\"")
	g.Expect(w.git.Write(fileA, bad)).To(Succeed())
	badRev, err := w.git.Commit("team-a: an empty maxmemory")
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
	g.Expect(cc.Spec.Config).NotTo(HaveKey("maxmemory"), "the refused spec reached the cluster")
	after := &cachev1alpha1.CacheCluster{}
	g.Expect(k8s.Get(ctx, previewKey, after)).To(Succeed())
	g.Expect(after.Generation).To(Equal(neighbour.Generation))
	nb, err := argocd.GetStatus(ctx, k8s, appB)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nb.Sync).To(Equal("Synced"))
	g.Expect(nb.Health).To(Equal("Healthy"))

	// The fix is the next commit.
	g.Expect(w.git.Write(fileA, w.basic(t, 4, w.config))).To(Succeed())
	fixed, err := w.git.Commit("team-a: revert the empty maxmemory")
	g.Expect(err).NotTo(HaveOccurred())
	start = time.Now()
	g.Expect(argocd.Refresh(ctx, k8s, appA, true)).To(Succeed())
	waitSyncedHealthy(g, appA, fixed)
	t.Logf("measured: fixing commit → Synced/Healthy in %s", argocd.Since(start))
}

func (w *workflow) prune(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	claims := &corev1.PersistentVolumeClaimList{}
	g.Expect(k8s.List(ctx, claims, client.InNamespace(nsA))).To(Succeed())
	g.Expect(claims.Items).NotTo(BeEmpty(), "basic's claims exist before the removal")
	g.Expect(w.git.Remove(fileA)).To(Succeed())
	rev, err := w.git.Commit("team-a: remove basic")
	g.Expect(err).NotTo(HaveOccurred())
	start := time.Now()
	g.Expect(argocd.Refresh(ctx, k8s, appA, true)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, basicKey, &cachev1alpha1.CacheCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "CacheCluster basic still exists: %v", err)
	}, limits.Removed, limits.Poll).Should(Succeed())
	t.Logf("measured: removing commit → CacheCluster gone in %s", argocd.Since(start))
	// Its volumes follow retainOnDelete: false (the default) here, so the
	// claims go with it.
	g.Eventually(func(g Gomega) {
		pvcs := &corev1.PersistentVolumeClaimList{}
		g.Expect(k8s.List(ctx, pvcs, client.InNamespace(nsA))).To(Succeed())
		for _, c := range pvcs.Items {
			g.Expect(c.Name).NotTo(HavePrefix("data-basic-"), "claim %s kept although retainOnDelete is false", c.Name)
		}
	}, limits.Removed, limits.Poll).Should(Succeed())
	waitSyncedHealthy(g, appA, rev)
	t.Logf("measured: removing commit → Synced/Healthy in %s", argocd.Since(start))
	waitRunning(g, previewKey)
}

// planCmd runs kubectl cache plan in the work tree and returns its output.
func (w *workflow) plan(g Gomega, args ...string) string {
	cmd := exec.Command(cliBin, append([]string{"plan"}, args...)...)
	cmd.Dir = w.git.Dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig())
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	return string(out)
}

// watchCommit asks for a refresh after a commit and waits until app has
// synced rev and is Healthy, having been seen Progressing and never
// Degraded on the way. It returns how long that took.
func watchCommit(t *testing.T, g Gomega, app, rev string) time.Duration {
	start := time.Now()
	g.Expect(argocd.Refresh(context.Background(), k8s, app, true)).To(Succeed())
	seen := map[string]bool{}
	var degraded []string
	g.Eventually(func(g Gomega) {
		st, err := argocd.GetStatus(context.Background(), k8s, app)
		g.Expect(err).NotTo(HaveOccurred())
		seen[st.Health] = true
		if st.Health == "Degraded" {
			degraded = append(degraded, st.HealthMessage)
		}
		g.Expect(st.Revision).To(Equal(rev))
		g.Expect(st.Sync).To(Equal("Synced"))
		g.Expect(st.Health).To(Equal("Healthy"))
		g.Expect(seen["Progressing"]).To(BeTrue(), "the Application went Healthy without being seen Progressing")
	}, limits.Synced, limits.Poll).Should(Succeed())
	took := argocd.Since(start)
	g.Expect(degraded).To(BeEmpty(), "the Application was Degraded on the way")
	t.Logf("health seen on the way: %v", keys(seen))
	return took
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

// pods lists the pods of a CacheCluster by name.
func pods(g Gomega, key client.ObjectKey) map[string]corev1.Pod {
	list := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), list, client.InNamespace(key.Namespace),
		client.MatchingLabels{cachev1alpha1.LabelCluster: key.Name})).To(Succeed())
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out
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
