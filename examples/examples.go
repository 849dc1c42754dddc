// Package examples holds the example CacheCluster manifests, embedded, for
// the tests that run them.
package examples

import (
	"embed"
	"fmt"

	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

//go:embed *.yaml
var files embed.FS

// Load reads examples/NAME.yaml strictly (a misspelt field is an error) and
// puts it in namespace.
func Load(name, namespace string) (*cachev1alpha1.CacheCluster, error) {
	data, err := files.ReadFile(name + ".yaml")
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("examples/%s.yaml: %w", name, err)
	}
	cc := &cachev1alpha1.CacheCluster{}
	if err := cc.DecodeStrict(js); err != nil {
		return nil, fmt.Errorf("examples/%s.yaml: %w", name, err)
	}
	cc.Namespace = namespace
	return cc, nil
}
