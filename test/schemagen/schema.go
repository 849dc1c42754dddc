package schemagen

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// Schema is the part of an OpenAPI v3 schema (as a CRD holds it) that the
// generator reads.
type Schema struct {
	Type                 string             `json:"type,omitempty"`
	Format               string             `json:"format,omitempty"`
	Properties           map[string]*Schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	Items                *Schema            `json:"items,omitempty"`
	AdditionalProperties *Schema            `json:"additionalProperties,omitempty"`
	Enum                 []any              `json:"enum,omitempty"`
	Minimum              *float64           `json:"minimum,omitempty"`
	Maximum              *float64           `json:"maximum,omitempty"`
	MinLength            *int64             `json:"minLength,omitempty"`
	MaxLength            *int64             `json:"maxLength,omitempty"`
	MinItems             *int64             `json:"minItems,omitempty"`
	MaxItems             *int64             `json:"maxItems,omitempty"`
	MaxProperties        *int64             `json:"maxProperties,omitempty"`
	Pattern              string             `json:"pattern,omitempty"`
	Default              any                `json:"default,omitempty"`
	AnyOf                []*Schema          `json:"anyOf,omitempty"`
	IntOrString          bool               `json:"x-kubernetes-int-or-string,omitempty"`
	PreserveUnknown      bool               `json:"x-kubernetes-preserve-unknown-fields,omitempty"`
	ListType             string             `json:"x-kubernetes-list-type,omitempty"`
	ListMapKeys          []string           `json:"x-kubernetes-list-map-keys,omitempty"`
}

// CRD is what a CustomResourceDefinition file says about one served version.
type CRD struct {
	Group, Kind, Version string
	Schema               *Schema
}

// APIVersion is group/version.
func (c *CRD) APIVersion() string { return c.Group + "/" + c.Version }

type crdFile struct {
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind string `json:"kind"`
		} `json:"names"`
		Versions []struct {
			Name   string `json:"name"`
			Schema struct {
				OpenAPIV3Schema *Schema `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// LoadCRD reads the schema of one version from a CRD YAML file.
func LoadCRD(path, version string) (*CRD, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f crdFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, v := range f.Spec.Versions {
		if v.Name == version {
			if v.Schema.OpenAPIV3Schema == nil {
				return nil, fmt.Errorf("%s: version %s has no openAPIV3Schema", path, version)
			}
			return &CRD{Group: f.Spec.Group, Kind: f.Spec.Names.Kind, Version: version, Schema: v.Schema.OpenAPIV3Schema}, nil
		}
	}
	return nil, fmt.Errorf("%s: no version %s", path, version)
}
