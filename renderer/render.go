package renderer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/charts"
)

// Capabilities is what the target cluster offers, as Helm's .Capabilities
// shows it to templates. The controller reads it from discovery; the CLI uses
// DefaultCapabilities, the same as `helm template`.
type Capabilities struct {
	// KubeVersion is the server's version, e.g. "v1.37.2".
	KubeVersion string
	// APIVersions lists "group/version" and "group/version/Kind" entries.
	APIVersions []string
}

// DefaultCapabilities are the capabilities `helm template` assumes when it is
// not given a cluster.
func DefaultCapabilities() Capabilities {
	return Capabilities{
		KubeVersion: chartutil.DefaultCapabilities.KubeVersion.Version,
		APIVersions: slices.Clone(chartutil.DefaultCapabilities.APIVersions),
	}
}

func (c Capabilities) helm() (*chartutil.Capabilities, error) {
	caps := chartutil.DefaultCapabilities.Copy()
	if c.KubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(c.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("kubernetes version %q: %w", c.KubeVersion, err)
		}
		caps.KubeVersion = *kv
	}
	if c.APIVersions != nil {
		caps.APIVersions = slices.Clone(c.APIVersions)
	}
	return caps, nil
}

func (c Capabilities) key() string {
	versions := slices.Clone(c.APIVersions)
	sort.Strings(versions)
	return c.KubeVersion + "|" + strings.Join(versions, ",")
}

// Renderer renders the embedded cachecluster chart. It is safe for concurrent
// use and remembers recent results by chart digest, values and capabilities,
// so a reconcile of an unchanged CacheCluster does not run the template
// engine again.
type Renderer struct {
	chart  *chart.Chart
	digest string
	cache  *resultCache
}

// New loads the chart embedded in the binary.
func New() (*Renderer, error) {
	return NewFromFS(charts.CacheCluster, charts.CacheClusterRoot)
}

// NewFromFS loads a chart from a folder of a file system; tests use it to
// render a broken chart.
func NewFromFS(fsys fs.FS, root string) (*Renderer, error) {
	var files []*loader.BufferedFile
	digest := sha256.New()
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, root+"/")
		files = append(files, &loader.BufferedFile{Name: name, Data: data})
		// WalkDir visits files in lexical order, so the digest is stable.
		fmt.Fprintf(digest, "%s\x00%d\x00", name, len(data))
		digest.Write(data)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading chart %s: %w", root, err)
	}
	c, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", root, err)
	}
	return &Renderer{chart: c, digest: hex.EncodeToString(digest.Sum(nil)), cache: newResultCache(renderCacheSize)}, nil
}

// renderCacheSize is how many renders are kept: about 2 KB each
// (resultCache), so one for every cluster of a fleet of a few thousand.
// A cluster's routine reconcile then decodes its render (about 0.2 ms)
// instead of running the template engine (10-25 ms). At 32 entries of
// decoded maps, hundreds of clusters came round too seldom to hit it.
const renderCacheSize = 4096

var (
	defaultOnce     sync.Once
	defaultRenderer *Renderer
	defaultErr      error
)

// Shared is the renderer of the embedded chart, loaded once.
func Shared() (*Renderer, error) {
	defaultOnce.Do(func() { defaultRenderer, defaultErr = New() })
	return defaultRenderer, defaultErr
}

// Render is Shared().Render.
func Render(cc *cachev1alpha1.CacheCluster, caps Capabilities) ([]*unstructured.Unstructured, error) {
	r, err := Shared()
	if err != nil {
		return nil, err
	}
	return r.Render(cc, caps)
}

// ChartDigest identifies the chart's content.
func (r *Renderer) ChartDigest() string { return r.digest }

// Render returns the objects of a CacheCluster in install order (Helm's
// InstallOrder, then namespace and name), each a fresh copy the caller may
// change. The result depends only on the CacheCluster and the capabilities.
func (r *Renderer) Render(cc *cachev1alpha1.CacheCluster, caps Capabilities) ([]*unstructured.Unstructured, error) {
	values, err := Values(cc)
	if err != nil {
		return nil, err
	}
	return r.RenderValues(values, caps)
}

// ReleaseName is the Helm release the renderer renders: the objects equal
// what `helm template cachecluster charts/cachecluster --namespace
// NAMESPACE -f values.yaml` prints, NAMESPACE being the values' namespace.
// The chart's templates read neither the release name nor its namespace
// today; fixing both keeps the equality exact if one ever does.
const ReleaseName = "cachecluster"

// RenderValues renders the chart with the given values, as `helm template
// cachecluster charts/cachecluster --namespace NAMESPACE -f values.yaml`
// would (see ReleaseName).
func (r *Renderer) RenderValues(values map[string]any, caps Capabilities) ([]*unstructured.Unstructured, error) {
	// A values file passes through YAML before Helm sees it; doing the same
	// here gives templates the same types (numbers as float64) and so the
	// same output as `helm template`.
	valuesYAML, err := yaml.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("encoding values: %w", err)
	}
	key := r.digest + "|" + hashBytes(valuesYAML) + "|" + caps.key()
	if objs, ok := r.cache.get(key); ok {
		return objs, nil
	}

	objs, err := r.render(valuesYAML, caps)
	if err != nil {
		return nil, err
	}
	r.cache.put(key, objs)
	return objs, nil
}

func (r *Renderer) render(valuesYAML []byte, caps Capabilities) ([]*unstructured.Unstructured, error) {
	vals, err := chartutil.ReadValues(valuesYAML)
	if err != nil {
		return nil, fmt.Errorf("decoding values: %w", err)
	}
	helmCaps, err := caps.helm()
	if err != nil {
		return nil, err
	}
	namespace, _ := vals["namespace"].(string)
	renderVals, err := chartutil.ToRenderValues(r.chart, vals.AsMap(), chartutil.ReleaseOptions{Name: ReleaseName, Namespace: namespace, IsInstall: true}, helmCaps)
	if err != nil {
		return nil, fmt.Errorf("chart values: %w", err)
	}
	files, err := engine.Render(r.chart, renderVals)
	if err != nil {
		return nil, fmt.Errorf("rendering chart: %w", err)
	}
	// NOTES.txt and partials are not objects.
	for name := range files {
		if path.Ext(name) != ".yaml" && path.Ext(name) != ".yml" {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, helmCaps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("splitting rendered chart: %w", err)
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("chart renders Helm hook %s, which the operator cannot run", hooks[0].Path)
	}

	objs := make([]*unstructured.Unstructured, 0, len(manifests))
	for _, m := range manifests {
		// SortManifests trims each document, which takes the line break
		// off a block scalar that ends it (redis.conf). helm template
		// prints every document followed by a line break; decode that.
		data, err := yaml.YAMLToJSON([]byte(m.Content + "\n"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		if string(data) == "null" || string(data) == "{}" {
			continue
		}
		// Unstructured's own decoder keeps integers as int64, as the API
		// machinery expects.
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		if obj.GetKind() == "" || obj.GetAPIVersion() == "" || obj.GetName() == "" {
			return nil, fmt.Errorf("%s: rendered object lacks apiVersion, kind or name", m.Name)
		}
		objs = append(objs, obj)
	}
	SortInstallOrder(objs)
	return objs, nil
}

// SortInstallOrder sorts objects the way they are applied: by Helm's install
// order of kinds, then by namespace and name.
func SortInstallOrder(objs []*unstructured.Unstructured) {
	rank := func(kind string) int {
		if i := slices.Index(releaseutil.InstallOrder, kind); i >= 0 {
			return i
		}
		return len(releaseutil.InstallOrder)
	}
	sort.SliceStable(objs, func(i, j int) bool {
		a, b := objs[i], objs[j]
		if ra, rb := rank(a.GetKind()), rank(b.GetKind()); ra != rb {
			return ra < rb
		}
		if a.GetKind() != b.GetKind() {
			return a.GetKind() < b.GetKind()
		}
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		return a.GetName() < b.GetName()
	})
}

func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
