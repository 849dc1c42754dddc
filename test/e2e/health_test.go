//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/gitops/argocd"
)

// health is what Argo CD (through our health.lua, in Argo CD's restricted
// Lua VM) and kstatus (Flux) say about the live object.
func health(g Gomega, cc *cachev1alpha1.CacheCluster) (argoStatus, argoMessage string, kstatus status.Status) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(cachev1alpha1.GroupVersion.WithKind("CacheCluster"))
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), u)).To(Succeed())
	st, msg, err := argocd.EvalHealth(argocd.HealthScript, u.Object)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := status.Compute(u)
	g.Expect(err).NotTo(HaveOccurred())
	return st, msg, res.Status
}

// capture writes the live object to $CACHEOPS_CAPTURE_DIR/captured-NAME.yaml
// when that is set: the Argo CD health check's test data comes from such
// runs (make capture).
func capture(g Gomega, cc *cachev1alpha1.CacheCluster, name string) {
	dir := os.Getenv("CACHEOPS_CAPTURE_DIR")
	if dir == "" {
		return
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(cachev1alpha1.GroupVersion.WithKind("CacheCluster"))
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), u); apierrors.IsNotFound(err) {
		return // gone already (a deletion)
	} else {
		g.Expect(err).NotTo(HaveOccurred())
	}
	u.SetManagedFields(nil)
	out, err := yaml.Marshal(u.Object)
	g.Expect(err).NotTo(HaveOccurred())
	header := "# Case: " + name + ", captured from a live object by the end-to-end suite (make capture).\n"
	g.Expect(os.WriteFile(filepath.Join(dir, "captured-"+name+".yaml"), append([]byte(header), out...), 0o644)).To(Succeed())
}

// The health check and kstatus read real objects the way the captured test
// data says: Healthy/Current when running, Degraded/Failed when stalled,
// Suspended when paused.
func TestHealthOfLiveObjects(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-health")

	running := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, running)).To(Succeed())
	waitReplicating(g, running)
	g.Eventually(func(g Gomega) {
		st, _, ks := health(g, running)
		g.Expect(st).To(Equal("Healthy"))
		g.Expect(ks).To(Equal(status.CurrentStatus))
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
	capture(g, running, "running")

	stalled := loadExample(t, "basic", ns)
	stalled.Name = "stalled"
	stalled.Spec.Auth.SecretRef = &cachev1alpha1.SecretKeyRef{Name: "does-not-exist"}
	g.Expect(k8s.Create(ctx, stalled)).To(Succeed())
	g.Eventually(func(g Gomega) {
		st, msg, ks := health(g, stalled)
		g.Expect(st).To(Equal("Degraded"))
		g.Expect(msg).To(ContainSubstring("does-not-exist"))
		g.Expect(ks).To(Equal(status.FailedStatus))
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
	capture(g, stalled, "stalled-auth-secret-missing")

	// Fixing the cause in git (here: creating the Secret) heals it.
	secret := &corev1.Secret{}
	secret.Name, secret.Namespace = "does-not-exist", ns
	secret.StringData = map[string]string{"password": "s3cret-s3cret"}
	g.Expect(k8s.Create(ctx, secret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		st, _, _ := health(g, stalled)
		g.Expect(st).To(Equal("Healthy"))
	}, limits.ClusterReady, limits.Poll).Should(Succeed())

	paused := &cachev1alpha1.CacheCluster{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(running), paused)).To(Succeed())
	patch := client.MergeFrom(paused.DeepCopy())
	paused.Spec.Paused = true
	g.Expect(k8s.Patch(ctx, paused, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		st, _, _ := health(g, running)
		g.Expect(st).To(Equal("Suspended"))
	}, limits.ClusterReady, limits.Poll).Should(Succeed())
	capture(g, running, "paused")
}
