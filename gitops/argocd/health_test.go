package argocd

import (
	"embed"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// customizations is the check in Argo CD's resource_customizations layout.
//
//go:embed all:cache.cacheops.io
var customizations embed.FS

//go:embed argocd-cm-snippet.yaml
var configMapSnippet []byte

const (
	checkDir   = "cache.cacheops.io/CacheCluster"
	snippetKey = "resource.customizations.health.cache.cacheops.io_CacheCluster"
)

// healthTests is Argo CD's health_test.yaml.
type healthTests struct {
	Tests []struct {
		HealthStatus struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"healthStatus"`
		InputPath string `json:"inputPath"`
	} `json:"tests"`
}

// libModes are the two ways Argo CD may run the script: its default sandbox
// (no string library) and with resource.customizations.useOpenLibs set.
var libModes = []struct {
	name     string
	openLibs bool
}{
	{"argocd-sandbox", false},
	{"open-libs", true},
}

func loadHealthTests(t *testing.T) healthTests {
	t.Helper()
	g := NewWithT(t)
	data, err := customizations.ReadFile(path.Join(checkDir, "health_test.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var ht healthTests
	g.Expect(yaml.UnmarshalStrict(data, &ht)).To(Succeed())
	g.Expect(ht.Tests).NotTo(BeEmpty())
	return ht
}

func loadObject(t *testing.T, inputPath string) map[string]any {
	t.Helper()
	g := NewWithT(t)
	data, err := customizations.ReadFile(path.Join(checkDir, inputPath))
	g.Expect(err).NotTo(HaveOccurred(), "health_test.yaml names %s", inputPath)
	var obj map[string]any
	g.Expect(yaml.Unmarshal(data, &obj)).To(Succeed(), inputPath)
	return obj
}

func TestEmbeddedScriptIsTheFile(t *testing.T) {
	g := NewWithT(t)
	data, err := customizations.ReadFile(path.Join(checkDir, "health.lua"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(HealthScript).To(Equal(string(data)))
}

func TestHealthCases(t *testing.T) {
	for _, tc := range loadHealthTests(t).Tests {
		obj := loadObject(t, tc.InputPath)
		for _, mode := range libModes {
			t.Run(strings.TrimSuffix(path.Base(tc.InputPath), ".yaml")+"/"+mode.name, func(t *testing.T) {
				g := NewWithT(t)
				status, message, err := evalHealth(HealthScript, obj, mode.openLibs)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(status).To(Equal(tc.HealthStatus.Status), "status of %s", tc.InputPath)
				g.Expect(message).To(Equal(tc.HealthStatus.Message), "message of %s", tc.InputPath)
			})
		}
	}
}

func TestEveryTestdataFileIsACase(t *testing.T) {
	g := NewWithT(t)
	referenced := map[string]bool{}
	for _, tc := range loadHealthTests(t).Tests {
		g.Expect(referenced).NotTo(HaveKey(tc.InputPath), "%s is listed twice", tc.InputPath)
		referenced[tc.InputPath] = true
	}
	entries, err := fs.ReadDir(customizations, path.Join(checkDir, "testdata"))
	g.Expect(err).NotTo(HaveOccurred())
	var files []string
	for _, e := range entries {
		files = append(files, "testdata/"+e.Name())
	}
	g.Expect(files).NotTo(BeEmpty())
	for _, f := range files {
		g.Expect(referenced).To(HaveKey(f), "%s is not a case in health_test.yaml", f)
	}
	g.Expect(referenced).To(HaveLen(len(files)), "health_test.yaml names a file that does not exist")
}

// TestTestdataLooksLikeTheAPI keeps the cases honest: each file starts with a
// comment saying what it is, is a CacheCluster, and, unless it is malformed
// on purpose, decodes strictly into the API type with complete conditions.
func TestTestdataLooksLikeTheAPI(t *testing.T) {
	for _, tc := range loadHealthTests(t).Tests {
		t.Run(path.Base(tc.InputPath), func(t *testing.T) {
			g := NewWithT(t)
			data, err := customizations.ReadFile(path.Join(checkDir, tc.InputPath))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(data)).To(HavePrefix("# Case: "), "header comment")

			obj := loadObject(t, tc.InputPath)
			g.Expect(obj).To(HaveKeyWithValue("apiVersion", cachev1alpha1.GroupVersion.String()))
			g.Expect(obj).To(HaveKeyWithValue("kind", "CacheCluster"))
			g.Expect(obj).To(HaveKeyWithValue("metadata", And(HaveKey("name"), HaveKey("namespace"), HaveKey("generation"), HaveKey("uid"))))
			if strings.HasPrefix(path.Base(tc.InputPath), "malformed-") {
				return
			}

			var cc cachev1alpha1.CacheCluster
			g.Expect(yaml.UnmarshalStrict(data, &cc)).To(Succeed())
			for _, c := range cc.Status.Conditions {
				g.Expect(c.Type).NotTo(BeEmpty())
				g.Expect(string(c.Status)).To(BeElementOf("True", "False", "Unknown"), c.Type)
				g.Expect(c.Reason).To(MatchRegexp(`^[A-Z][A-Za-z]*$`), c.Type)
				g.Expect(c.Message).NotTo(BeEmpty(), c.Type)
				g.Expect(c.LastTransitionTime.IsZero()).To(BeFalse(), c.Type)
				g.Expect(c.ObservedGeneration).To(BeNumerically(">", 0), c.Type)
				g.Expect(c.ObservedGeneration).To(BeNumerically("<=", cc.Generation), c.Type)
				if c.Type == cachev1alpha1.ConditionReconciling || c.Type == cachev1alpha1.ConditionStalled {
					g.Expect(string(c.Status)).To(Equal("True"), "%s is present only while True", c.Type)
				}
			}
		})
	}
}

// apiPhases reads the phases from the API's enum marker, so a phase added to
// the API fails this test until a case covers it.
func apiPhases(t *testing.T) []string {
	t.Helper()
	g := NewWithT(t)
	src, err := os.ReadFile("../../api/v1alpha1/conditions.go")
	g.Expect(err).NotTo(HaveOccurred())
	m := regexp.MustCompile(`(?m)^// \+kubebuilder:validation:Enum=(.+)\ntype Phase string`).FindSubmatch(src)
	g.Expect(m).NotTo(BeNil(), "enum marker of Phase in conditions.go")
	return strings.Split(strings.TrimSpace(string(m[1])), ";")
}

func TestEveryPhaseIsCovered(t *testing.T) {
	g := NewWithT(t)
	phases := apiPhases(t)
	g.Expect(phases).To(ContainElements(
		string(cachev1alpha1.PhasePending), string(cachev1alpha1.PhaseInitializing),
		string(cachev1alpha1.PhaseRunning), string(cachev1alpha1.PhaseScaling),
		string(cachev1alpha1.PhaseUpgrading), string(cachev1alpha1.PhaseBackupRunning),
		string(cachev1alpha1.PhaseDegraded), string(cachev1alpha1.PhaseFailed),
	))

	covered := map[string]bool{}
	healths := map[string]bool{}
	for _, tc := range loadHealthTests(t).Tests {
		healths[tc.HealthStatus.Status] = true
		if status, ok := loadObject(t, tc.InputPath)["status"].(map[string]any); ok {
			if phase, ok := status["phase"].(string); ok {
				covered[phase] = true
			}
		}
	}
	for _, p := range phases {
		g.Expect(covered).To(HaveKey(p), "no case in health_test.yaml has phase %s", p)
	}
	for _, h := range []string{"Healthy", "Progressing", "Degraded", "Suspended"} {
		g.Expect(healths).To(HaveKey(h), "no case in health_test.yaml expects %s", h)
	}
}

// TestMalformedObjects feeds the script objects no API server would store
// with our CRD; the script must not fail on any of them.
func TestMalformedObjects(t *testing.T) {
	meta := func() map[string]any { return map[string]any{"name": "x", "namespace": "y", "generation": 3} }
	ready := map[string]any{"type": "Ready", "status": "True", "message": "3 of 3 pods ready, all objects applied"}
	cases := []struct {
		name           string
		obj            map[string]any
		status, reason string
	}{
		{"nil object", nil, "Progressing", "Waiting for CacheCluster to be reconciled"},
		{"empty object", map[string]any{}, "Progressing", "Waiting for CacheCluster to be reconciled"},
		{"metadata is a string", map[string]any{"metadata": "x", "status": map[string]any{"observedGeneration": 3, "phase": "Running", "conditions": []any{ready}}}, "Healthy", "3 of 3 pods ready, all objects applied"},
		{"spec is a string", map[string]any{"metadata": meta(), "spec": "paused", "status": map[string]any{"observedGeneration": 3, "conditions": []any{ready}}}, "Healthy", "3 of 3 pods ready, all objects applied"},
		{"paused is a string", map[string]any{"metadata": meta(), "spec": map[string]any{"paused": "true"}, "status": map[string]any{"observedGeneration": 3, "conditions": []any{ready}}}, "Healthy", "3 of 3 pods ready, all objects applied"},
		{"status is a number", map[string]any{"metadata": meta(), "status": 42}, "Progressing", "Waiting for CacheCluster to be reconciled"},
		{"status is a list", map[string]any{"metadata": meta(), "status": []any{"Running"}}, "Progressing", "Waiting for spec to be observed"},
		{"status is empty", map[string]any{"metadata": meta(), "status": map[string]any{}}, "Progressing", "Waiting for spec to be observed"},
		{"observedGeneration is a string", map[string]any{"metadata": meta(), "status": map[string]any{"observedGeneration": "3", "conditions": []any{ready}}}, "Progressing", "Waiting for spec to be observed"},
		{"conditions is a string", map[string]any{"metadata": meta(), "status": map[string]any{"observedGeneration": 3, "phase": "Running", "conditions": "Ready"}}, "Progressing", "Waiting for CacheCluster to be reconciled"},
		{"conditions holds strings and lists", map[string]any{"metadata": meta(), "status": map[string]any{"observedGeneration": 3, "phase": "Running", "conditions": []any{"Ready", []any{"True"}, nil, 7}}}, "Progressing", "Waiting for CacheCluster to be reconciled"},
		{"condition message is a number", map[string]any{"metadata": meta(), "status": map[string]any{"observedGeneration": 3, "phase": "Running", "conditions": []any{map[string]any{"type": "Ready", "status": "True", "message": 5}}}}, "Healthy", "CacheCluster is ready"},
		{"condition status is a bool", map[string]any{"metadata": meta(), "status": map[string]any{"observedGeneration": 3, "phase": "Running", "conditions": []any{map[string]any{"type": "Ready", "status": true}}}}, "Progressing", "Waiting for CacheCluster to be reconciled"},
		{"phase is a number", map[string]any{"metadata": meta(), "status": map[string]any{"observedGeneration": 3, "phase": 3}}, "Progressing", "Waiting for CacheCluster to be reconciled"},
		{"phase is a table", map[string]any{"metadata": meta(), "status": map[string]any{"observedGeneration": 3, "phase": map[string]any{"name": "Scaling"}, "conditions": []any{ready}}}, "Healthy", "3 of 3 pods ready, all objects applied"},
		{"unknown phase", map[string]any{"metadata": meta(), "status": map[string]any{"observedGeneration": 3, "phase": "Exploding"}}, "Progressing", "Waiting for CacheCluster to be reconciled"},
		{"Failed without any condition", map[string]any{"metadata": meta(), "status": map[string]any{"observedGeneration": 3, "phase": "Failed"}}, "Degraded", "CacheCluster has failed"},
		{"Degraded without any condition", map[string]any{"metadata": meta(), "status": map[string]any{"observedGeneration": 3, "phase": "Degraded"}}, "Degraded", "CacheCluster is degraded"},
		{"Scaling without any condition", map[string]any{"metadata": meta(), "status": map[string]any{"observedGeneration": 3, "phase": "Scaling"}}, "Progressing", "Scaling: the change from git is still rolling out"},
		{"Scaling with only Ready", map[string]any{"metadata": meta(), "status": map[string]any{"observedGeneration": 3, "phase": "Scaling", "conditions": []any{map[string]any{"type": "Ready", "status": "False", "message": "StatefulSet x: 3 of 4 pods exist"}}}}, "Progressing", "Scaling: the change from git is still rolling out. StatefulSet x: 3 of 4 pods exist"},
		{"BackupRunning without any condition", map[string]any{"metadata": meta(), "status": map[string]any{"observedGeneration": 3, "phase": "BackupRunning"}}, "Progressing", "A backup is running and the cluster is not ready yet"},
		{"Ready without a message", map[string]any{"metadata": meta(), "status": map[string]any{"observedGeneration": 3, "phase": "Running", "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}}, "Healthy", "CacheCluster is ready"},
		{"empty deletionTimestamp", map[string]any{"metadata": map[string]any{"generation": 3, "deletionTimestamp": ""}, "status": map[string]any{"observedGeneration": 3, "conditions": []any{ready}}}, "Healthy", "3 of 3 pods ready, all objects applied"},
	}
	for _, tc := range cases {
		for _, mode := range libModes {
			t.Run(tc.name+"/"+mode.name, func(t *testing.T) {
				g := NewWithT(t)
				status, message, err := evalHealth(HealthScript, tc.obj, mode.openLibs)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(status).To(Equal(tc.status))
				g.Expect(message).To(Equal(tc.reason))
			})
		}
	}
}

// TestSandboxIsArgoCDs proves that EvalHealth is as strict as Argo CD: a
// script that needs the string library fails there and works only with
// every library open.
func TestSandboxIsArgoCDs(t *testing.T) {
	scripts := map[string]string{
		"string.format":   `return {status = string.format("%s", "Healthy"), message = ""}`,
		"method on value": `local s = "Healthy"; return {status = s:lower(), message = ""}`,
		"io":              `io.write("x"); return {status = "Healthy", message = ""}`,
	}
	obj := map[string]any{}
	for name, script := range scripts {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, _, err := EvalHealth(script, obj)
			g.Expect(err).To(HaveOccurred())
		})
	}
	g := NewWithT(t)
	status, _, err := evalHealth(scripts["string.format"], obj, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal("Healthy"))
	status, _, err = EvalHealth(`local t = {}; table.insert(t, "Healthy"); return {status = t[1], message = tostring(#t)}`, obj)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal("Healthy"))
}

func TestEvalHealthErrors(t *testing.T) {
	g := NewWithT(t)
	for script, want := range map[string]string{
		`return {status = `:                                    "running health script",
		`error("boom")`:                                        "boom",
		`return "Healthy"`:                                     "not a table",
		`return {status = "Fine", message = ""}`:               "does not know",
		`return {message = "no status"}`:                       "does not know",
		`return {status = "Healthy", message = {"a", "list"}}`: "not a string",
	} {
		_, _, err := EvalHealth(script, nil)
		g.Expect(err).To(MatchError(ContainSubstring(want)), script)
	}
	_, _, err := EvalHealth(HealthScript, map[string]any{"status": make(chan int)})
	g.Expect(err).To(MatchError(ContainSubstring("cannot convert")))
}

// TestScriptAvoidsTheStringLibrary reads the script itself: every branch runs
// in TestHealthCases, but a branch added later without a case would slip by.
func TestScriptAvoidsTheStringLibrary(t *testing.T) {
	g := NewWithT(t)
	methodCall := regexp.MustCompile(`[\w)\]"']:\w+\s*[("{]`)
	for i, line := range strings.Split(HealthScript, "\n") {
		code := line
		if j := strings.Index(code, "--"); j >= 0 {
			code = code[:j]
		}
		code = regexp.MustCompile(`"[^"]*"`).ReplaceAllString(code, `""`)
		g.Expect(code).NotTo(ContainSubstring("string."), "line %d: %s", i+1, line)
		g.Expect(methodCall.MatchString(code)).To(BeFalse(), "line %d uses method syntax: %s", i+1, line)
	}
}

func TestConfigMapSnippetEmbedsTheScript(t *testing.T) {
	g := NewWithT(t)
	var cm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	g.Expect(yaml.Unmarshal(configMapSnippet, &cm)).To(Succeed())
	g.Expect(cm.APIVersion).To(Equal("v1"))
	g.Expect(cm.Kind).To(Equal("ConfigMap"))
	g.Expect(cm.Metadata.Name).To(Equal("argocd-cm"))
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	g.Expect(keys).To(Equal([]string{snippetKey}))
	g.Expect(cm.Data[snippetKey] == HealthScript).To(BeTrue(),
		"the script in argocd-cm-snippet.yaml differs from health.lua; copy health.lua into it, indented by four spaces")
}
