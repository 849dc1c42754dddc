//go:build e2e

package argocd

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cacheops/cacheops/test/argocd"
	"github.com/cacheops/cacheops/test/cluster"
)

// operatorValues are the chart values the operator's Application adds to
// the example's: a recommendation after 5 s of memory pressure instead of
// 5 minutes, for the recommendation step.
var operatorValues = map[string]any{"manager": map[string]any{"recommendAfter": "5s"}}

// fromExample reads a manifest of examples/argocd and points it at the
// test's repository.
func fromExample(t *testing.T, g Gomega, name string, edit func(*unstructured.Unstructured)) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "examples", "argocd", name))
	g.Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal(b, &u.Object)).To(Succeed())
	edit(u)
	out, err := yaml.Marshal(u.Object)
	g.Expect(err).NotTo(HaveOccurred())
	return string(out)
}

func toYAML(g Gomega, u *unstructured.Unstructured) string {
	out, err := yaml.Marshal(u.Object)
	g.Expect(err).NotTo(HaveOccurred())
	return string(out)
}

// install commits the repository's first state and creates the root
// Application, the one object applied by hand (as `kubectl apply -f
// root.yaml`). The folder apps/ holds the shipped examples/argocd project
// (wave -2) and operator Application (wave -1: charts/cacheops with its
// CRDs) pointed at this repository, and one Application per team (wave 0).
func (w *workflow) install(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	url := w.git.URL()
	g.Expect(w.git.CopyDir(filepath.Join(repo, "charts", "cacheops"), "charts/cacheops")).To(Succeed())
	g.Expect(w.git.Write("apps/project.yaml", fromExample(t, g, "project.yaml", func(u *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedStringSlice(u.Object, []string{url}, "spec", "sourceRepos")).To(Succeed())
		dests, _, _ := unstructured.NestedSlice(u.Object, "spec", "destinations")
		for _, ns := range []string{nsA, nsB} {
			dests = append(dests, map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns})
		}
		g.Expect(unstructured.SetNestedSlice(u.Object, dests, "spec", "destinations")).To(Succeed())
	}))).To(Succeed())
	g.Expect(w.git.Write("apps/operator.yaml", fromExample(t, g, "operator.yaml", func(u *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedField(u.Object, url, "spec", "source", "repoURL")).To(Succeed())
		g.Expect(unstructured.SetNestedField(u.Object, operatorValues["manager"], "spec", "source", "helm", "valuesObject", "manager")).To(Succeed())
		// The teams' namespaces, each with a Role of the operator.
		g.Expect(unstructured.SetNestedStringSlice(u.Object, []string{nsA, nsB}, "spec", "source", "helm", "valuesObject", "watchNamespaces")).To(Succeed())
	}))).To(Succeed())
	// team-a lets people scale by hand in an emergency: its Application
	// syncs every commit but does not undo live changes (no self-heal).
	g.Expect(w.git.Write("apps/team-a.yaml", toYAML(g, argocd.Application(argocd.AppSpec{
		Name: appA, RepoURL: url, Path: pathA, DestinationNamespace: nsA, Project: "cacheops", Wave: "0", NoSelfHeal: true,
	})))).To(Succeed())
	g.Expect(w.git.Write("apps/team-b.yaml", toYAML(g, argocd.Application(argocd.AppSpec{
		Name: appB, RepoURL: url, Path: pathB, DestinationNamespace: nsB, Project: "cacheops", Wave: "0",
	})))).To(Succeed())
	g.Expect(w.git.Write(fileA, basic(t, 3, ""))).To(Succeed())
	g.Expect(w.git.Write(pathA+"/README.md", "team a's caches\n")).To(Succeed())
	// A small maxmemory, for the recommendation step to fill.
	g.Expect(w.git.Write(fileB, example(t, "single.yaml", nsB)+"  config:\n    maxmemory: 8mb\n")).To(Succeed())
	rev, err := w.git.Commit("the operator, team-a: basic, team-b: preview")
	g.Expect(err).NotTo(HaveOccurred())
	w.revs["install"] = rev

	for _, ns := range []string{nsA, nsB} {
		g.Expect(k8s.Create(ctx, namespace(ns))).To(Succeed())
	}
	start := time.Now()
	g.Expect(k8s.Create(ctx, argocd.Application(argocd.AppSpec{
		Name: appRoot, RepoURL: url, Path: "apps", DestinationNamespace: argocd.Namespace,
	}))).To(Succeed())
	for _, app := range []string{appOperator, appA, appB, appRoot} {
		waitSyncedHealthy(g, app, rev)
		t.Logf("measured: root Application created → %s Synced/Healthy in %s", app, argocd.Since(start))
	}

	// Argo CD installed the CRD, from the chart, as part of the operator's
	// Application.
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "cacheclusters.cache.cacheops.io"}, crd)).To(Succeed())
	op, err := argocd.GetStatus(ctx, k8s, appOperator)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(op.Resources).To(ContainElement(And(HaveField("Kind", "CustomResourceDefinition"),
		HaveField("Name", crd.GetName()), HaveField("Status", "Synced"))), "the operator's Application does not manage the CRD")
	t.Logf("the CRD, as Argo CD left it: labels %v, annotations %v", crd.GetLabels(), crd.GetAnnotations())

	// The operator runs as the chart's pod, with the operator's image, and
	// leads.
	mgr := managerPod(g)
	g.Expect(mgr.Spec.Containers[0].Image).To(MatchRegexp(`^ghcr\.io/cacheops/cacheops-manager:`))
	g.Expect(cluster.OperatorImagePattern).To(HavePrefix("ghcr.io/cacheops/cacheops-manager:"))
	leases := &coordinationv1.LeaseList{}
	g.Expect(k8s.List(ctx, leases, client.InNamespace(nsOperator))).To(Succeed())
	g.Expect(leases.Items).To(ContainElement(HaveField("Spec.HolderIdentity", HaveValue(HavePrefix(mgr.Name)))))

	// The waves held for the CRD: the teams' Applications were created
	// only after it, so their CacheClusters never met a missing kind. (They
	// need not wait for the manager pod: a CacheCluster waits for it.)
	ready := podReadySince(mgr)
	for _, app := range []string{appA, appB} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(argocd.ApplicationGVK)
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: argocd.Namespace, Name: app}, u)).To(Succeed())
		g.Expect(u.GetCreationTimestamp().Time).NotTo(BeTemporally("<", crd.GetCreationTimestamp().Time),
			"Application %s was created before the CRD", app)
		t.Logf("Application %s created %s after the CRD, %s after the manager pod became ready", app,
			u.GetCreationTimestamp().Sub(crd.GetCreationTimestamp().Time), u.GetCreationTimestamp().Sub(ready.Truncate(time.Second)))
	}

	// The CacheCluster's health came from the shipped script: Argo CD has
	// no built-in check for the kind, and the script's message is persisted.
	st, err := argocd.GetStatus(ctx, k8s, appA)
	g.Expect(err).NotTo(HaveOccurred())
	res := resource(g, st, "CacheCluster", "basic")
	g.Expect(res.Health).To(Equal("Healthy"))
	g.Expect(res.HealthMessage).NotTo(BeEmpty())
	t.Logf("CacheCluster health from health.lua: %s: %q", res.Health, res.HealthMessage)
	cc := waitRunning(g, basicKey)
	g.Expect(cc.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
	waitRunning(g, previewKey)

	// It was that pod that did it.
	logs, err := os.ReadFile(filepath.Join(env.PodLogDir(), nsOperator+"_"+mgr.Name+"_manager.log"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(logs)).To(ContainSubstring(`"CacheCluster":{"name":"basic","namespace":"` + nsA + `"}`))
}

// managerPod is the operator's running pod.
func managerPod(g Gomega) corev1.Pod {
	list := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), list, client.InNamespace(nsOperator))).To(Succeed())
	var running []corev1.Pod
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	g.Expect(running).To(HaveLen(1), "one manager pod runs")
	return running[0]
}

// podReadySince is when the pod's Ready condition last became True.
func podReadySince(p corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
