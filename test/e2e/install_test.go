//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// The operator installed the way users install it: `helm template` of
// charts/cacheops applied to the cluster, its Deployment running as a pod
// (the operator's image runs the manager built from this tree) with the
// chart's ServiceAccount, RBAC, leader election and probes, talking to the
// API server from inside the pod network. It reconciles examples/basic.yaml
// to a replicating cluster. The suite's own manager is stopped meanwhile.
func TestChartRunsTheOperatorInTheCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stopManager()
	t.Cleanup(func() { _ = startManager(managerBin, stateDir) })

	const release, system = "cacheops", "cacheops-system"
	newNamespace(t, system)
	// The chart's default RBAC is namespaced: the operator watches the
	// namespaces listed, each of which must exist before the install.
	ns := "e2e-in-cluster"
	newNamespace(t, ns)
	manifests := runProgram(g, filepath.Join(binDir, "helm"), "template", release, filepath.Join(repo, "charts", "cacheops"),
		"--namespace", system, "--skip-crds", "--set", "image.tag=e2e", "--set", "manager.logLevel=debug",
		"--set", "watchNamespaces={"+ns+"}")
	g.Expect(manifests).NotTo(ContainSubstring("kind: ClusterRole"), "the chart's default RBAC should be namespaced")
	kubectl := func(stdin string, args ...string) string {
		cmd := exec.Command(filepath.Join(binDir, "kubectl"), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig())
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		return string(out)
	}
	kubectl(manifests, "apply", "-f", "-")
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(binDir, "kubectl"), "delete", "--wait", "--ignore-not-found", "-f", "-")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig())
		cmd.Stdin = strings.NewReader(manifests)
		_ = cmd.Run()
	})

	// The manager pod starts, passes its readiness probe and leads.
	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: system, Name: release + "-manager"}, d)).To(Succeed())
		g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1))
	}, limits.PodRestart, limits.Poll).Should(Succeed(), notReadyPods(system, "the manager Deployment never became available"))
	pods := &corev1.PodList{}
	g.Expect(k8s.List(ctx, pods, client.InNamespace(system))).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1))
	mgr := pods.Items[0]
	g.Expect(mgr.Spec.Containers[0].Image).To(Equal("ghcr.io/cacheops/cacheops-manager:e2e"))

	cc := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	got := waitReplicating(g, cc)
	g.Expect(got.Status.CurrentMaster).NotTo(BeEmpty())
	g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))

	// It was the pod that did it: its log has the reconciles, and the
	// Lease names it.
	logs, err := os.ReadFile(filepath.Join(env.PodLogDir(), system+"_"+mgr.Name+"_manager.log"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(logs)).To(ContainSubstring(`"msg":"Starting manager"`))
	g.Expect(string(logs)).To(ContainSubstring(`"CacheCluster":{"name":"basic","namespace":"` + ns + `"}`))
	g.Expect(bytes.Count(logs, []byte(`"level":"error"`))).To(BeZero(), "errors in the in-cluster manager's log:\n%s", logs)
	leases := kubectl("", "get", "leases", "-n", system, "-o", "jsonpath={.items[*].spec.holderIdentity}")
	g.Expect(leases).To(ContainSubstring(mgr.Name))
	t.Logf("in-cluster manager %s reconciled %s/basic: master %s", mgr.Name, ns, got.Status.CurrentMaster)

	// Cleanly gone: the cluster is deleted by the in-cluster manager (its
	// finalizer), then the operator.
	g.Expect(k8s.Delete(ctx, cc)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(cc), &cachev1alpha1.CacheCluster{}))
	}, limits.PodRestart, limits.Poll).Should(BeTrue(), "the in-cluster manager removes its finalizer")
}

// runProgram runs a program and returns its standard output.
func runProgram(g Gomega, name string, args ...string) string {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	g.Expect(cmd.Run()).To(Succeed(), stderr.String())
	return stdout.String()
}
