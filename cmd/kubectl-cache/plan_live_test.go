package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/gitops/change"
)

// startAPIServer starts a kube-apiserver and etcd (envtest) with the
// chart's CRDs and returns a client and a kubeconfig file for the CLI.
func startAPIServer(t *testing.T) (client.Client, string) {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join("..", "..", "bin")
	}
	te := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "charts", "cacheops", "crds")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := te.Start()
	t.Cleanup(func() { _ = te.Stop() })
	if err != nil {
		t.Fatalf("starting envtest (needs kube-apiserver and etcd in %s: make tools): %v", assets, err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = cachev1alpha1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	user, err := te.AddUser(envtest.User{Name: "plan", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	return c, writeFile(t, t.TempDir(), "kubeconfig", string(kc))
}

// A cluster scaled outside git (kubectl scale, the scale subresource): a
// pull request from 5 to 3 replicas is planned from the 6 that run, with
// the drift named; without --base the live objects are the base.
func TestPlanLiveStartsFromTheLiveSpec(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, kubeconfig := startAPIServer(t)

	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}})).To(Succeed())
	clusters, err := change.DecodeManifest([]byte(baseCluster))
	g.Expect(err).NotTo(HaveOccurred())
	shop := clusters[0]
	g.Expect(c.Create(ctx, shop)).To(Succeed())
	scale := &autoscalingv1.Scale{}
	g.Expect(c.SubResource("scale").Get(ctx, shop, scale)).To(Succeed())
	g.Expect(scale.Spec.Replicas).To(BeEquivalentTo(5))
	scale.Spec.Replicas = 6
	g.Expect(c.SubResource("scale").Update(ctx, shop, client.WithSubResourceBody(scale))).To(Succeed())

	repo := t.TempDir()
	gitIn := func(args ...string) {
		out, err := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
	}
	gitIn("init", "-q", "-b", "main")
	writeFile(t, repo, "shop.yaml", baseCluster)
	gitIn("add", ".")
	gitIn("commit", "-qm", "base")
	writeFile(t, repo, "shop.yaml", strings.Replace(baseCluster, "replicas: 5", "replicas: 3", 1))
	writeFile(t, repo, "new.yaml", strings.Replace(baseCluster, "name: shop", "name: new", 1))
	gitIn("add", ".")
	gitIn("commit", "-qm", "shop to 3, a new cluster")
	t.Chdir(repo)

	var text bytes.Buffer
	g.Expect(run([]string{"plan", "--live", "--kubeconfig", kubeconfig, "--base", "HEAD~1", "--head", "HEAD", "shop.yaml"}, nil, &text)).To(Succeed())
	g.Expect(text.String()).To(HavePrefix("CacheCluster prod/shop: changed\n" +
		"  DRIFT    the live spec differs from --base; this plan starts from the live spec:\n" +
		"             spec.replicas: 6 live, 5 in git\n" +
		"  1. Scaling: replicas 6→3"))

	// Without --live the plan believes git: 5→3.
	plans := planJSON(t, g, "--base", "HEAD~1", "--head", "HEAD", "shop.yaml")
	g.Expect(plans[0].Operations[0].Description).To(HavePrefix("replicas 5→3"))
	g.Expect(plans[0].Drift).To(BeEmpty())

	// Without --base: every cluster of the head against its live object.
	plans = planJSON(t, g, "--live", "--kubeconfig", kubeconfig, "--head", "HEAD")
	g.Expect(plans).To(HaveLen(2))
	g.Expect(plans[0].Name).To(Equal("new"))
	g.Expect(plans[0].Change).To(Equal("created"))
	g.Expect(plans[1].Name).To(Equal("shop"))
	g.Expect(plans[1].Drift).To(BeEmpty(), "the base is the live spec")
	g.Expect(plans[1].Operations).To(HaveLen(1))
	g.Expect(plans[1].Operations[0].Description).To(HavePrefix("replicas 6→3"))

	// A head that is what runs: no change at all.
	plans = planJSON(t, g, "--live", "--kubeconfig", kubeconfig, "--head", writeFile(t, t.TempDir(), "same.yaml", strings.Replace(baseCluster, "replicas: 5", "replicas: 6", 1)))
	g.Expect(plans).To(BeEmpty())
}
