package renderer

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// helmBinary is the helm CLI built from the pinned module by `make tools`.
// Under `make test` (HELM_BIN set) a missing binary fails the test; a plain
// `go test` without it skips.
func helmBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("HELM_BIN")
	if bin == "" {
		bin = filepath.Join("..", "bin", "helm")
		if _, err := os.Stat(bin); err != nil {
			t.Skip("helm CLI not built; run make tools (make test always runs this)")
		}
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("HELM_BIN=%s: %v", bin, err)
	}
	return bin
}

// The operator's objects are exactly what `helm template` prints for the
// values the renderer derives: one chart, read three ways.
func TestRenderEqualsHelmTemplate(t *testing.T) {
	helm := helmBinary(t)
	for name, cc := range loadExamples(t) {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			values, err := Values(cc)
			g.Expect(err).NotTo(HaveOccurred())
			data, err := yaml.Marshal(values)
			g.Expect(err).NotTo(HaveOccurred())
			valuesFile := filepath.Join(t.TempDir(), "values.yaml")
			g.Expect(os.WriteFile(valuesFile, data, 0o644)).To(Succeed())

			out, err := exec.Command(helm, "template", filepath.Join("..", "charts", "cachecluster"), "-f", valuesFile).CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), string(out))

			var fromHelm []*unstructured.Unstructured
			for _, doc := range releaseutil.SplitManifests(string(out)) {
				js, err := yaml.YAMLToJSON([]byte(doc))
				g.Expect(err).NotTo(HaveOccurred())
				if string(js) == "null" {
					continue
				}
				obj := &unstructured.Unstructured{}
				g.Expect(obj.UnmarshalJSON(js)).To(Succeed())
				fromHelm = append(fromHelm, obj)
			}
			SortInstallOrder(fromHelm)

			ours, err := Render(cc, DefaultCapabilities())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(encodeObjects(t, fromHelm))).To(Equal(string(encodeObjects(t, ours))))
		})
	}
}
