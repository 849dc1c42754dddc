package change

import (
	"fmt"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/charts"
)

// schema is the structural schema of the CacheCluster CRD the chart ships,
// read once.
var schema = sync.OnceValues(func() (*structuralschema.Structural, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(charts.CacheClusterCRD, crd); err != nil {
		return nil, err
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != cachev1alpha1.GroupVersion.Version || v.Schema == nil {
			continue
		}
		internal := &apiextensionsinternal.JSONSchemaProps{}
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
			return nil, err
		}
		return structuralschema.NewStructural(internal)
	}
	return nil, fmt.Errorf("the CacheCluster CRD has no schema for %s", cachev1alpha1.GroupVersion.Version)
})

// WithDefaults returns cc with the defaults of the CRD filled in, as the
// API server stores it: a manifest from git compares with a live object
// only after this, or every defaulted field would look changed.
func WithDefaults(cc *cachev1alpha1.CacheCluster) (*cachev1alpha1.CacheCluster, error) {
	s, err := schema()
	if err != nil {
		return nil, fmt.Errorf("the CacheCluster CRD: %w", err)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cc)
	if err != nil {
		return nil, err
	}
	defaulting.Default(obj, s)
	out := &cachev1alpha1.CacheCluster{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, out); err != nil {
		return nil, err
	}
	return out, nil
}
