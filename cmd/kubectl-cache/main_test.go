package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/cacheops/cacheops/gitops/change"
	"github.com/cacheops/cacheops/renderer"
	"github.com/cacheops/cacheops/test/manifests"
)

// `kubectl cache render` prints what helm template prints for the values it
// derives, for every example: the same objects the operator applies. The
// comparison is strict: both streams are read the way kubectl apply -f reads
// them (no trimming, YAML 1.1 scalars), and every object must be equal to
// the byte in every string, for the release name and namespace the renderer
// renders.
func TestRenderEqualsHelmTemplate(t *testing.T) {
	helm := os.Getenv("HELM_BIN")
	if helm == "" {
		helm = filepath.Join("..", "..", "bin", "helm")
	}
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("the helm CLI built by `make tools` is needed: %v", err)
	}
	examples, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	// The examples render no backup-store; this one does (a claim target,
	// and a restore from another claim).
	claims := filepath.Join(t.TempDir(), "claims.yaml")
	if err := os.WriteFile(claims, []byte(claimsCluster), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ex := range append(examples, claims) {
		t.Run(filepath.Base(ex), func(t *testing.T) {
			g := NewWithT(t)
			var ours, values bytes.Buffer
			g.Expect(run([]string{"render", "-f", ex}, nil, &ours)).To(Succeed())
			g.Expect(run([]string{"render", "-f", ex, "--values"}, nil, &values)).To(Succeed())
			var vals struct {
				Namespace string `json:"namespace"`
			}
			g.Expect(yaml.Unmarshal(values.Bytes(), &vals)).To(Succeed())
			g.Expect(vals.Namespace).NotTo(BeEmpty())
			valuesFile := filepath.Join(t.TempDir(), "values.yaml")
			g.Expect(os.WriteFile(valuesFile, values.Bytes(), 0o644)).To(Succeed())
			var stderr bytes.Buffer
			cmd := exec.Command(helm, "template", renderer.ReleaseName, filepath.Join("..", "..", "charts", "cachecluster"),
				"--namespace", vals.Namespace, "-f", valuesFile)
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			g.Expect(err).NotTo(HaveOccurred(), stderr.String())

			want := decodeStream(t, out)
			g.Expect(want).NotTo(BeEmpty())
			expectSameObjects(t, "helm template", want, "kubectl cache render", decodeStream(t, ours.Bytes()))

			// The objects the operator applies, before any printing.
			data, err := os.ReadFile(ex)
			g.Expect(err).NotTo(HaveOccurred())
			clusters, err := change.DecodeManifest(data)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(clusters).To(HaveLen(1))
			objs, err := renderer.Render(clusters[0], renderer.DefaultCapabilities())
			g.Expect(err).NotTo(HaveOccurred())
			applied, err := manifests.FromUnstructured(objs)
			g.Expect(err).NotTo(HaveOccurred())
			expectSameObjects(t, "helm template", want, "renderer.Render", applied)
		})
	}
}

const claimsCluster = `apiVersion: cache.cacheops.io/v1alpha1
kind: CacheCluster
metadata: {name: claims, namespace: team-b}
spec:
  version: "7.0.15"
  config: {maxmemory: 100mb}
  backup:
    autoRestore: true
    pvc: {claimName: cache-backups, prefix: prod/}
  restore:
    key: prod/team-b/old/old-1.rdb
    pvc: {claimName: other-backups}
`

// expectSameObjects fails with every difference between the two sides.
func expectSameObjects(t *testing.T, wantName string, want []map[string]any, gotName string, got []map[string]any) {
	t.Helper()
	for _, d := range manifests.Diff(wantName, want, gotName, got) {
		t.Error(d)
	}
}

// decodeStream is manifests.Decode, failing the test on an error.
func decodeStream(t *testing.T, stream []byte) []map[string]any {
	t.Helper()
	objs, err := manifests.Decode(stream)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func TestRenderWithoutCacheClusterFails(t *testing.T) {
	err := run([]string{"render", "-f", "-"}, strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), &bytes.Buffer{})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("holds no CacheCluster")))
}

func TestRenderRejectsMisspeltFields(t *testing.T) {
	g := NewWithT(t)
	in := "apiVersion: cache.cacheops.io/v1alpha1\nkind: CacheCluster\nmetadata: {name: x}\nspec: {version: '7.0.15', replicass: 3}\n"
	err := run([]string{"render", "-f", "-"}, strings.NewReader(in), &bytes.Buffer{})
	g.Expect(err).To(MatchError(ContainSubstring(`unknown field "spec.replicass"`)))
}

// render names the operator's pods as the manager does, from the same
// flags, and only for that command.
func TestRenderNamesTheOperatorAsTheManagerDoes(t *testing.T) {
	g := NewWithT(t)
	ex := filepath.Join("..", "..", "examples", "basic.yaml")
	var out bytes.Buffer
	g.Expect(run([]string{"render", "-f", ex, "--operator-namespace", "ops", "--operator-pod-labels", "app.kubernetes.io/instance=mine,app.kubernetes.io/name=cacheops"}, nil, &out)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("kubernetes.io/metadata.name: ops\n"))
	g.Expect(out.String()).To(ContainSubstring("app.kubernetes.io/instance: mine\n"))
	g.Expect(renderer.Operator.Namespace).To(Equal("cacheops-system"), "the flags outlive the command")
	g.Expect(run([]string{"render", "-f", ex, "--operator-pod-labels", "not a label"}, nil, &out)).To(MatchError(ContainSubstring("--operator-pod-labels")))
}
