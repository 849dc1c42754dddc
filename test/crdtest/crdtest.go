// Package crdtest changes the installed CacheCluster CRD for a test: it
// stores an object as an older, looser CRD would have, which today's types
// cannot decode. It is for the integration and end-to-end suites only.
package crdtest

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Undecodable is a CacheCluster spec a loose CRD admits and today's types
// cannot decode: probeTimeoutSeconds is a number in Go. (spec.replicas
// would not do: the scale subresource checks it whatever the schema says.)
func Undecodable() map[string]any {
	return map[string]any{"version": "7.0.15", "highAvailability": map[string]any{"probeTimeoutSeconds": "fast"}}
}

// UndecodableField is the field the decoder names for Undecodable.
const UndecodableField = "spec.highAvailability.probeTimeoutSeconds"

// CreateUndecodable creates obj (whose spec should be Undecodable) while
// the CacheCluster CRD accepts any spec, then puts today's CRD back and
// waits until the API server applies it again.
func CreateUndecodable(ctx context.Context, cfg *rest.Config, obj *unstructured.Unstructured, timeout time.Duration) error {
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return err
	}
	key := client.ObjectKey{Name: "cacheclusters.cache.cacheops.io"}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, key, crd); err != nil {
		return err
	}
	strict := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.DeepCopy()
	loose := strict.DeepCopy()
	loose.XValidations = nil
	loose.Properties["spec"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	set := func(schema *apiextensionsv1.JSONSchemaProps) error {
		return retry(ctx, timeout, func() error {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, key, got); err != nil {
				return err
			}
			got.Spec.Versions[0].Schema.OpenAPIV3Schema = schema
			return c.Update(ctx, got)
		})
	}
	if err := set(loose); err != nil {
		return fmt.Errorf("loosening the CRD: %w", err)
	}
	// The API server switches schemas a moment after the update: retry
	// until the loose one takes the object, and afterwards until today's
	// refuses it again.
	created := retry(ctx, timeout, func() error { return c.Create(ctx, obj.DeepCopy()) })
	if err := set(strict); err != nil {
		return fmt.Errorf("restoring the CRD: %w", err)
	}
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": obj.GetAPIVersion(), "kind": obj.GetKind(),
		"metadata": map[string]any{"name": "schema-probe", "namespace": obj.GetNamespace()},
		"spec":     Undecodable(),
	}}
	if err := retry(ctx, timeout, func() error {
		if c.Create(ctx, probe.DeepCopy(), client.DryRunAll) == nil {
			return fmt.Errorf("the API server still admits an undecodable spec")
		}
		return nil
	}); err != nil {
		return err
	}
	return created
}

func retry(ctx context.Context, timeout time.Duration, fn func() error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = fn()
		return last == nil, nil
	})
	if err != nil && last != nil {
		return last
	}
	return err
}
