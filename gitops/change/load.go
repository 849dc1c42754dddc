package change

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/gitops/internal/gitcmd"
)

// Load reads the CacheClusters of one side of a change, keyed by
// namespace/name (a cluster without a namespace is in "default"). ref is a
// file, a folder (every .yaml and .yml file in it, recursively) or a git
// revision of the repository of the working directory (the given paths, or
// every YAML file of the revision; a path absent at the revision is
// skipped).
func Load(ref string, paths []string) (map[string]*cachev1alpha1.CacheCluster, error) {
	files, err := readRef(ref, paths)
	if err != nil {
		return nil, err
	}
	clusters := map[string]*cachev1alpha1.CacheCluster{}
	for path, data := range files {
		ccs, err := DecodeManifest(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, cc := range ccs {
			if cc.Namespace == "" {
				cc.Namespace = "default"
			}
			clusters[cc.Namespace+"/"+cc.Name] = cc
		}
	}
	return clusters, nil
}

// DecodeManifest reads the CacheClusters of a multi-document YAML file,
// strictly: a misspelt field is an error, as kubectl apply would make it
// with server-side field validation. Documents of other kinds are skipped.
func DecodeManifest(data []byte) ([]*cachev1alpha1.CacheCluster, error) {
	var out []*cachev1alpha1.CacheCluster
	for _, doc := range releaseutil.SplitManifests(string(data)) {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return nil, err
		}
		if bytes.Equal(js, []byte("null")) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, err
		}
		if u.GroupVersionKind() != cachev1alpha1.GroupVersion.WithKind("CacheCluster") {
			continue
		}
		cc := &cachev1alpha1.CacheCluster{}
		if err := cc.DecodeStrict(js); err != nil {
			return nil, fmt.Errorf("CacheCluster %s: %w", u.GetName(), err)
		}
		out = append(out, cc)
	}
	return out, nil
}

// readRef returns the files of ref by the path they are named by.
func readRef(ref string, paths []string) (map[string][]byte, error) {
	st, err := os.Stat(ref)
	switch {
	case err != nil:
		return readRevision(ref, paths)
	case st.IsDir():
		return readFolder(ref)
	}
	data, err := os.ReadFile(ref)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{ref: data}, nil
}

// readFolder reads every YAML file under dir.
func readFolder(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isYAML(p) {
			return err
		}
		data, err := os.ReadFile(p)
		files[p] = data
		return err
	})
	if err != nil {
		return nil, err
	}
	return files, nil
}

// readRevision reads paths (default: every YAML file) at a git revision.
func readRevision(rev string, paths []string) (map[string][]byte, error) {
	if _, err := gitcmd.Run("rev-parse", "--verify", "--quiet", rev+"^{commit}"); err != nil {
		return nil, fmt.Errorf("neither a file, a folder nor a git revision here")
	}
	if len(paths) == 0 {
		var err error
		if paths, err = yamlFilesAt(rev); err != nil {
			return nil, err
		}
	}
	files := map[string][]byte{}
	for _, p := range paths {
		if _, err := gitcmd.Run("cat-file", "-e", rev+":"+p); err != nil {
			continue // absent at this revision
		}
		out, err := gitcmd.Run("show", rev+":"+p)
		if err != nil {
			return nil, err
		}
		files[p] = []byte(out)
	}
	return files, nil
}

// yamlFilesAt lists the YAML files of a git revision.
func yamlFilesAt(rev string) ([]string, error) {
	out, err := gitcmd.Run("ls-tree", "-r", "--full-tree", "--name-only", rev)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, p := range strings.Split(strings.TrimSpace(out), "\n") {
		if isYAML(p) {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

func isYAML(p string) bool {
	return strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")
}
