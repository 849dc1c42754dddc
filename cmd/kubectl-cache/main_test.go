package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cacheops/cacheops/renderer"
)

// `kubectl cache render` prints what helm template prints for the values it
// derives, for every example: the same objects the operator applies.
func TestRenderEqualsHelmTemplate(t *testing.T) {
	helm := os.Getenv("HELM_BIN")
	if helm == "" {
		helm = filepath.Join("..", "..", "bin", "helm")
	}
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("the helm CLI built by `make tools` is needed: %v", err)
	}
	examples, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	for _, ex := range examples {
		t.Run(filepath.Base(ex), func(t *testing.T) {
			g := NewWithT(t)
			var ours, values bytes.Buffer
			g.Expect(run([]string{"render", "-f", ex}, nil, &ours)).To(Succeed())
			g.Expect(run([]string{"render", "-f", ex, "--values"}, nil, &values)).To(Succeed())
			valuesFile := filepath.Join(t.TempDir(), "values.yaml")
			g.Expect(os.WriteFile(valuesFile, values.Bytes(), 0o644)).To(Succeed())
			out, err := exec.Command(helm, "template", filepath.Join("..", "..", "charts", "cachecluster"), "-f", valuesFile).CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), string(out))
			g.Expect(normalize(t, string(out))).To(Equal(normalize(t, ours.String())))
		})
	}
}

func TestRenderWithoutCacheClusterFails(t *testing.T) {
	err := run([]string{"render", "-f", "-"}, strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), &bytes.Buffer{})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("holds no CacheCluster")))
}

// normalize parses a YAML stream into objects in install order and encodes
// them again, so comments and document order do not matter.
func normalize(t *testing.T, stream string) string {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range releaseutil.SplitManifests(stream) {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if string(js) == "null" {
			continue
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(js); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	renderer.SortInstallOrder(objs)
	var b strings.Builder
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return b.String()
}

func TestRenderRejectsMisspeltFields(t *testing.T) {
	g := NewWithT(t)
	in := "apiVersion: cache.cacheops.io/v1alpha1\nkind: CacheCluster\nmetadata: {name: x}\nspec: {version: '7.0.15', replicass: 3}\n"
	err := run([]string{"render", "-f", "-"}, strings.NewReader(in), &bytes.Buffer{})
	g.Expect(err).To(MatchError(ContainSubstring(`unknown field "spec.replicass"`)))
}
