package v1alpha1

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
)

// An object the API server stores does not always decode into these types:
// it may have been written under an older CRD, or by hand into a field the
// schema did not check. If decoding failed, the informer that lists every
// CacheCluster would fail as a whole and the operator would reconcile no
// cluster at all. So a CacheCluster or CacheBackup that does not decode is
// kept with its metadata only, and DecodeError says why; controllers report
// it on that object and leave it alone, and the others go on.

// UnmarshalJSON decodes a CacheCluster; see DecodeError.
func (c *CacheCluster) UnmarshalJSON(data []byte) error {
	type plain CacheCluster
	var p plain
	meta, decodeErr, err := decodeOrMeta(data, &p)
	if err != nil {
		return err
	}
	if decodeErr != "" {
		*c = CacheCluster{TypeMeta: meta.TypeMeta, ObjectMeta: meta.ObjectMeta, DecodeError: decodeErr}
		return nil
	}
	*c = CacheCluster(p)
	return nil
}

// UnmarshalJSON decodes a CacheBackup; see CacheCluster.DecodeError.
func (b *CacheBackup) UnmarshalJSON(data []byte) error {
	type plain CacheBackup
	var p plain
	meta, decodeErr, err := decodeOrMeta(data, &p)
	if err != nil {
		return err
	}
	if decodeErr != "" {
		*b = CacheBackup{TypeMeta: meta.TypeMeta, ObjectMeta: meta.ObjectMeta, DecodeError: decodeErr}
		return nil
	}
	*b = CacheBackup(p)
	return nil
}

// decodeOrMeta decodes data into into (a type without UnmarshalJSON, so
// this does not recurse). If that fails, it decodes the metadata alone and
// returns it with the reason; err is set only when not even the metadata
// decodes (not a Kubernetes object at all).
func decodeOrMeta(data []byte, into any) (meta metav1.PartialObjectMetadata, decodeErr string, err error) {
	full := kjson.UnmarshalCaseSensitivePreserveInts(data, into)
	if full == nil {
		return meta, "", nil
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &meta); err != nil {
		return meta, "", full
	}
	return meta, describeDecodeError(full), nil
}

// describeDecodeError names the field and the value's problem, e.g.
// "spec.replicas: cannot decode string into int32".
func describeDecodeError(err error) string {
	return fmt.Sprintf("the stored object does not match the cache.cacheops.io/v1alpha1 types (%v); fix the field it names with kubectl edit, or delete the object", err)
}

// DecodeStrict decodes a CacheCluster from JSON for programs that read
// files (the CLI, examples): an unknown field or a value of the wrong type
// is an error naming the field, as kubectl apply with server-side field
// validation would make it, instead of a DecodeError.
func (c *CacheCluster) DecodeStrict(data []byte) error {
	type plain CacheCluster
	var p plain
	strict, err := kjson.UnmarshalStrict(data, &p, kjson.DisallowUnknownFields, kjson.DisallowDuplicateFields)
	if err != nil {
		return err
	}
	if len(strict) > 0 {
		return errors.Join(strict...)
	}
	*c = CacheCluster(p)
	return nil
}
