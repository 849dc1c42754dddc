package chart

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	annotationSyncWave       = "argocd.argoproj.io/sync-wave"
	annotationCompareOptions = "argocd.argoproj.io/compare-options"
)

// TestArgoCDExamples loads every manifest under examples/argocd and checks
// that Argo CD would install the operator before the CacheClusters, with
// server-side apply and server-side diff, inside what the project allows.
func TestArgoCDExamples(t *testing.T) {
	docs := loadManifests(t, filepath.Join(repoRoot(), "examples", "argocd"))
	var project *unstructured.Unstructured
	apps := map[string]*unstructured.Unstructured{}
	for _, d := range docs {
		if d.GetAPIVersion() != "argoproj.io/v1alpha1" {
			t.Errorf("%s %s: apiVersion %s, want argoproj.io/v1alpha1", d.GetKind(), d.GetName(), d.GetAPIVersion())
		}
		if d.GetNamespace() != "argocd" {
			t.Errorf("%s %s is in namespace %q; Argo CD reads them from argocd", d.GetKind(), d.GetName(), d.GetNamespace())
		}
		switch d.GetKind() {
		case "AppProject":
			if project != nil {
				t.Errorf("more than one AppProject")
			}
			project = d
		case "Application":
			source, _, _ := unstructured.NestedString(d.Object, "spec", "source", "path")
			apps[source] = d
		default:
			t.Errorf("unexpected kind %s (%s)", d.GetKind(), d.GetName())
		}
	}
	if project == nil || project.GetName() != "cacheops" {
		t.Fatalf("want the AppProject cacheops")
	}
	operator, clusters := apps["charts/cacheops"], apps["examples"]
	if operator == nil || clusters == nil || len(apps) != 2 {
		t.Fatalf("want an Application of charts/cacheops and one of examples, got %v", keys(apps))
	}

	// Every Application: the project, its repository and destination,
	// server-side apply and diff.
	for _, app := range []*unstructured.Unstructured{operator, clusters} {
		name := app.GetName()
		if p, _, _ := unstructured.NestedString(app.Object, "spec", "project"); p != project.GetName() {
			t.Errorf("%s: project %q", name, p)
		}
		repo, _, _ := unstructured.NestedString(app.Object, "spec", "source", "repoURL")
		repos, _, _ := unstructured.NestedStringSlice(project.Object, "spec", "sourceRepos")
		if !slices.Contains(repos, repo) {
			t.Errorf("%s: repository %s is not among the project's %v", name, repo, repos)
		}
		p, _, _ := unstructured.NestedString(app.Object, "spec", "source", "path")
		if _, err := os.Stat(filepath.Join(repoRoot(), p)); err != nil {
			t.Errorf("%s: path %s: %v", name, p, err)
		}
		ns, _, _ := unstructured.NestedString(app.Object, "spec", "destination", "namespace")
		checkDestination(t, project, name, ns)
		opts, _, _ := unstructured.NestedStringSlice(app.Object, "spec", "syncPolicy", "syncOptions")
		if !slices.Contains(opts, "ServerSideApply=true") {
			t.Errorf("%s: syncOptions %v lack ServerSideApply=true", name, opts)
		}
		if !slices.Contains(strings.Split(app.GetAnnotations()[annotationCompareOptions], ","), "ServerSideDiff=true") {
			t.Errorf("%s: annotation %s should contain ServerSideDiff=true, got %q", name, annotationCompareOptions, app.GetAnnotations()[annotationCompareOptions])
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(app.Object, "spec", "ignoreDifferences"); found {
			t.Errorf("%s has ignoreDifferences; the operator writes no field Argo CD applies", name)
		}
	}

	// Sync waves: project, then the operator (and its CRD), then the
	// clusters.
	if w := wave(t, operator); w != -1 {
		t.Errorf("%s: sync wave %d, want -1", operator.GetName(), w)
	}
	if wave(t, project) >= wave(t, operator) || wave(t, operator) >= wave(t, clusters) {
		t.Errorf("sync waves: project %d, operator %d, clusters %d; want them in that order", wave(t, project), wave(t, operator), wave(t, clusters))
	}

	// The operator: CreateNamespace, and every kind the chart installs,
	// with every optional object on, is allowed by the project.
	opts, _, _ := unstructured.NestedStringSlice(operator.Object, "spec", "syncPolicy", "syncOptions")
	if !slices.Contains(opts, "CreateNamespace=true") {
		t.Errorf("%s: syncOptions %v lack CreateNamespace=true", operator.GetName(), opts)
	} else if !allowedKind(project, "", "Namespace", true) {
		t.Errorf("CreateNamespace=true needs Namespace in the project's clusterResourceWhitelist")
	}
	release, _, _ := unstructured.NestedString(operator.Object, "spec", "source", "helm", "releaseName")
	valuesObject, _, _ := unstructured.NestedMap(operator.Object, "spec", "source", "helm", "valuesObject")
	opNamespace, _, _ := unstructured.NestedString(operator.Object, "spec", "destination", "namespace")
	values, err := yaml.Marshal(valuesObject)
	if err != nil {
		t.Fatal(err)
	}
	for _, extra := range []string{"", allOptions} {
		r := renderChart(t, release, opNamespace, string(values)+"\n"+extra)
		for _, o := range r.objs {
			gvk := o.GroupVersionKind()
			clusterScoped := o.GetNamespace() == ""
			if !allowedKind(project, gvk.Group, gvk.Kind, clusterScoped) {
				t.Errorf("the chart installs %s %s, which project cacheops does not allow", gvk.Kind, o.GetName())
			}
			if !clusterScoped {
				checkDestination(t, project, operator.GetName()+" "+o.GetKind(), o.GetNamespace())
			}
		}
	}
	if len(loadChart(t).CRDObjects()) == 0 || !allowedKind(project, "apiextensions.k8s.io", "CustomResourceDefinition", true) {
		t.Errorf("the chart's CRDs need CustomResourceDefinition in the project's clusterResourceWhitelist")
	}

	// The clusters: the files the folder Application includes are
	// CacheClusters in namespaces the project allows.
	include, _, _ := unstructured.NestedString(clusters.Object, "spec", "source", "directory", "include")
	if recurse, _, _ := unstructured.NestedBool(clusters.Object, "spec", "source", "directory", "recurse"); recurse {
		t.Errorf("%s recurses into examples/, which holds these Argo CD manifests too", clusters.GetName())
	}
	dir := filepath.Join(repoRoot(), "examples")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	destNS, _, _ := unstructured.NestedString(clusters.Object, "spec", "destination", "namespace")
	matched := 0
	for _, e := range entries {
		if e.IsDir() || !globMatch(t, include, e.Name()) {
			continue
		}
		matched++
		for _, d := range loadManifests(t, filepath.Join(dir, e.Name())) {
			gvk := d.GroupVersionKind()
			if gvk.Group != "cache.cacheops.io" || gvk.Kind != "CacheCluster" {
				t.Errorf("%s: %s is not a CacheCluster", e.Name(), gvk.Kind)
			}
			if !allowedKind(project, gvk.Group, gvk.Kind, false) {
				t.Errorf("project cacheops does not allow %s", gvk.Kind)
			}
			ns := d.GetNamespace()
			if ns == "" {
				ns = destNS
			}
			checkDestination(t, project, clusters.GetName()+" "+e.Name(), ns)
		}
	}
	if matched == 0 {
		t.Errorf("%s includes %q, which matches no file in examples/", clusters.GetName(), include)
	}
}

// loadManifests reads every YAML document of a file, or of every .yaml file
// in a folder.
func loadManifests(t *testing.T, p string) []*unstructured.Unstructured {
	t.Helper()
	files := []string{p}
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		files, _ = filepath.Glob(filepath.Join(p, "*.yaml"))
		if len(files) == 0 {
			t.Fatalf("no YAML files in %s", p)
		}
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.UnmarshalStrict(doc, &obj.Object); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			if obj.GetKind() == "" || obj.GetName() == "" {
				t.Fatalf("%s: a document without kind or name", f)
			}
			out = append(out, obj)
		}
	}
	return out
}

func wave(t *testing.T, o *unstructured.Unstructured) int {
	t.Helper()
	s := o.GetAnnotations()[annotationSyncWave]
	if s == "" {
		return 0
	}
	w, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s: sync wave %q: %v", o.GetName(), s, err)
	}
	return w
}

// checkDestination fails unless the project lets Applications deploy to
// namespace ns of the in-cluster server.
func checkDestination(t *testing.T, project *unstructured.Unstructured, what, ns string) {
	t.Helper()
	dests, _, _ := unstructured.NestedSlice(project.Object, "spec", "destinations")
	for _, d := range dests {
		d := d.(map[string]any)
		server, _ := d["server"].(string)
		pattern, _ := d["namespace"].(string)
		if ok, _ := filepath.Match(pattern, ns); ok && (server == "https://kubernetes.default.svc" || server == "*") {
			return
		}
	}
	t.Errorf("%s: project %s does not allow namespace %q", what, project.GetName(), ns)
}

// allowedKind tells whether the project's whitelists let an Application
// create group/kind.
func allowedKind(project *unstructured.Unstructured, group, kind string, clusterScoped bool) bool {
	field := "namespaceResourceWhitelist"
	if clusterScoped {
		field = "clusterResourceWhitelist"
	}
	list, _, _ := unstructured.NestedSlice(project.Object, "spec", field)
	for _, e := range list {
		e := e.(map[string]any)
		g, _ := e["group"].(string)
		k, _ := e["kind"].(string)
		if (g == group || g == "*") && (k == kind || k == "*") {
			return true
		}
	}
	return false
}

// globMatch matches a file name against an Argo CD directory include
// pattern: a glob, or {a,b,...} of globs.
func globMatch(t *testing.T, pattern, name string) bool {
	t.Helper()
	alternatives := []string{pattern}
	if strings.HasPrefix(pattern, "{") && strings.HasSuffix(pattern, "}") {
		alternatives = strings.Split(pattern[1:len(pattern)-1], ",")
	}
	for _, alt := range alternatives {
		ok, err := filepath.Match(strings.TrimSpace(alt), name)
		if err != nil {
			t.Fatalf("include pattern %q: %v", pattern, err)
		}
		if ok {
			return true
		}
	}
	return false
}
