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
	err := kjson.UnmarshalCaseSensitivePreserveInts(data, &p)
	if err == nil {
		*c = CacheCluster(p)
		return nil
	}
	meta, merr := decodeMeta(data)
	if merr != nil {
		return err
	}
	*c = CacheCluster{TypeMeta: meta.TypeMeta, ObjectMeta: meta.ObjectMeta, DecodeError: describeDecodeError(err)}
	return nil
}

// UnmarshalJSON decodes a CacheBackup; see CacheCluster.DecodeError.
func (b *CacheBackup) UnmarshalJSON(data []byte) error {
	type plain CacheBackup
	var p plain
	err := kjson.UnmarshalCaseSensitivePreserveInts(data, &p)
	if err == nil {
		*b = CacheBackup(p)
		return nil
	}
	meta, merr := decodeMeta(data)
	if merr != nil {
		return err
	}
	*b = CacheBackup{TypeMeta: meta.TypeMeta, ObjectMeta: meta.ObjectMeta, DecodeError: describeDecodeError(err)}
	return nil
}

func decodeMeta(data []byte) (metav1.PartialObjectMetadata, error) {
	var m metav1.PartialObjectMetadata
	err := kjson.UnmarshalCaseSensitivePreserveInts(data, &m)
	return m, err
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
