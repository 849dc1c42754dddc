package chart

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// The release the tests install unless they say otherwise, as `helm install
// cacheops charts/cacheops -n cacheops-system` would.
const (
	defaultRelease   = "cacheops"
	defaultNamespace = "cacheops-system"
)

var scheme = newScheme()

func newScheme() *kruntime.Scheme {
	s := kruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := cachev1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func chartDir() string { return filepath.Join(repoRoot(), "charts", "cacheops") }

func loadChart(t testing.TB) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir())
	if err != nil {
		t.Fatalf("loading charts/cacheops: %v", err)
	}
	return c
}

// rendered is the chart's output for one set of values.
type rendered struct {
	objs []*unstructured.Unstructured
	// size is the rendered YAML in bytes, templates only (CRDs excluded).
	size int
}

// renderChart renders charts/cacheops as `helm template RELEASE
// charts/cacheops -n NAMESPACE -f values.yaml` would, and decodes every object
// into its Go type with unknown fields refused.
func renderChart(t testing.TB, release, namespace, valuesYAML string) rendered {
	t.Helper()
	r, err := tryRender(loadChart(t), release, namespace, valuesYAML)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func tryRender(c *chart.Chart, release, namespace, valuesYAML string) (rendered, error) {
	vals, err := chartutil.ReadValues([]byte(valuesYAML))
	if err != nil {
		return rendered{}, fmt.Errorf("values: %w", err)
	}
	caps := chartutil.DefaultCapabilities
	renderVals, err := chartutil.ToRenderValues(c, vals.AsMap(), chartutil.ReleaseOptions{
		Name: release, Namespace: namespace, Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return rendered{}, fmt.Errorf("chart values: %w", err)
	}
	files, err := engine.Render(c, renderVals)
	if err != nil {
		return rendered{}, fmt.Errorf("rendering: %w", err)
	}
	for name := range files {
		if ext := path.Ext(name); ext != ".yaml" && ext != ".yml" {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return rendered{}, fmt.Errorf("splitting: %w", err)
	}
	if len(hooks) > 0 {
		return rendered{}, fmt.Errorf("the chart renders hook %s; Argo CD and the tests expect none", hooks[0].Path)
	}
	var out rendered
	for _, m := range manifests {
		out.size += len(m.Content)
		obj := &unstructured.Unstructured{}
		// SortManifests trims each document, which takes the line break
		// off a block scalar that ends it (the dashboard JSON); helm
		// template prints every document followed by one.
		if err := yaml.Unmarshal([]byte(m.Content+"\n"), &obj.Object); err != nil {
			return rendered{}, fmt.Errorf("%s: %w", m.Name, err)
		}
		if err := checkTyped(obj); err != nil {
			return rendered{}, fmt.Errorf("%s: %s %s: %w", m.Name, obj.GetKind(), obj.GetName(), err)
		}
		out.objs = append(out.objs, obj)
	}
	return out, nil
}

// checkTyped decodes an object of a kind client-go knows into its Go type
// and fails on any field the type does not have (a typo in a template).
func checkTyped(obj *unstructured.Unstructured) error {
	typed, err := scheme.New(obj.GroupVersionKind())
	if err != nil {
		// ServiceMonitor and PrometheusRule: checked field by field.
		return nil
	}
	return kruntime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, typed, true)
}

// kinds lists the kinds the chart renders, sorted, each once.
func (r rendered) kinds() []string {
	var out []string
	for _, o := range r.objs {
		out = append(out, o.GetKind())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// get returns the one object of this kind and name (any namespace when ns is
// "*"), or fails.
func (r rendered) get(t testing.TB, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range r.objs {
		if o.GetKind() == kind && o.GetName() == name && (ns == "*" || o.GetNamespace() == ns) {
			return o
		}
	}
	t.Fatalf("the chart renders no %s %s/%s; it renders %v", kind, ns, name, r.names())
	return nil
}

func (r rendered) all(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func (r rendered) names() []string {
	var out []string
	for _, o := range r.objs {
		out = append(out, fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName()))
	}
	return out
}

// typed converts a rendered object into T.
func typed[T any](t testing.TB, obj *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := kruntime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, out); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return out
}

func deployment(t testing.TB, r rendered) *appsv1.Deployment {
	t.Helper()
	deps := r.all("Deployment")
	if len(deps) != 1 {
		t.Fatalf("want one Deployment, the chart renders %d", len(deps))
	}
	return typed[appsv1.Deployment](t, deps[0])
}

func managerContainer(t testing.TB, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container named manager", d.Name)
	return corev1.Container{}
}

// managerSource is cmd/manager/main.go, parsed.
func managerSource(t testing.TB) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(repoRoot(), "cmd", "manager", "main.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// managerFlags is a flag set with the flags cmd/manager/main.go defines, read
// from its source (flag.XxxVar(&v, "name", default, usage) calls), plus the
// zap logging flags it binds. Parsing the chart's args with it proves that
// the manager would accept them.
func managerFlags(t testing.TB) *flag.FlagSet {
	t.Helper()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	found := 0
	ast.Inspect(managerSource(t), func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || len(call.Args) != 4 {
			return true
		}
		if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "flag" {
			return true
		}
		lit, ok := call.Args[1].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		name, _ := strconv.Unquote(lit.Value)
		switch sel.Sel.Name {
		case "StringVar":
			fs.String(name, "", "")
		case "BoolVar":
			fs.Bool(name, false, "")
		case "DurationVar":
			fs.Duration(name, 0, "")
		case "IntVar":
			fs.Int(name, 0, "")
		default:
			t.Fatalf("cmd/manager defines flag %s with flag.%s, which this test does not know", name, sel.Sel.Name)
		}
		found++
		return true
	})
	if found == 0 {
		t.Fatal("found no flag definitions in cmd/manager/main.go")
	}
	(&zap.Options{}).BindFlags(fs)
	return fs
}

// parseArgs parses the manager container's args as the manager would.
func parseArgs(t testing.TB, args []string) *flag.FlagSet {
	t.Helper()
	fs := managerFlags(t)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("the manager would refuse the chart's args %q: %v", args, err)
	}
	if fs.NArg() > 0 {
		t.Fatalf("the manager takes no positional arguments, the chart passes %q", fs.Args())
	}
	return fs
}

// leaderElectionID is the LeaderElectionID literal of cmd/manager/main.go.
func leaderElectionID(t testing.TB) string {
	t.Helper()
	id := ""
	ast.Inspect(managerSource(t), func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok {
			return true
		}
		if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "LeaderElectionID" {
			if lit, ok := kv.Value.(*ast.BasicLit); ok {
				id, _ = strconv.Unquote(lit.Value)
			}
		}
		return true
	})
	if id == "" {
		t.Fatal("found no LeaderElectionID literal in cmd/manager/main.go")
	}
	return id
}

// metricDecl is one Prometheus metric the operator declares.
type metricDecl struct {
	name   string
	labels []string
	// histogram metrics are also queried as name_bucket, _sum and _count.
	histogram bool
}

// declaredMetrics reads the metrics the operator registers from the source
// of renderer/controller and dayTwo: prometheus.NewXxxVec(Opts{Name: ...},
// []string{labels}) and prometheus.NewDesc(name, help, labels, nil).
func declaredMetrics(t testing.TB) map[string]metricDecl {
	t.Helper()
	out := map[string]metricDecl{}
	for _, dir := range []string{"renderer/controller", "dayTwo", "dayTwo/probe"} {
		files, err := filepath.Glob(filepath.Join(repoRoot(), dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "prometheus" {
					return true
				}
				var d metricDecl
				switch sel.Sel.Name {
				case "NewCounterVec", "NewGaugeVec", "NewHistogramVec":
					if len(call.Args) != 2 {
						return true
					}
					d.name = optsName(call.Args[0])
					d.labels = stringList(call.Args[1])
					d.histogram = sel.Sel.Name == "NewHistogramVec"
				case "NewDesc":
					if len(call.Args) != 4 {
						return true
					}
					if lit, ok := call.Args[0].(*ast.BasicLit); ok {
						d.name, _ = strconv.Unquote(lit.Value)
					}
					d.labels = stringList(call.Args[2])
				default:
					return true
				}
				if d.name != "" {
					out[d.name] = d
				}
				return true
			})
		}
	}
	if len(out) == 0 {
		t.Fatal("found no metric declarations in renderer/controller or dayTwo")
	}
	return out
}

func optsName(e ast.Expr) string {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return ""
	}
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
			if v, ok := kv.Value.(*ast.BasicLit); ok {
				s, _ := strconv.Unquote(v.Value)
				return s
			}
		}
	}
	return ""
}

func stringList(e ast.Expr) []string {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	var out []string
	for _, el := range lit.Elts {
		if v, ok := el.(*ast.BasicLit); ok && v.Kind == token.STRING {
			s, _ := strconv.Unquote(v.Value)
			out = append(out, s)
		}
	}
	return out
}
