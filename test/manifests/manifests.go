package manifests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Decode reads a multi-document YAML (or JSON) stream as kubectl apply -f
// does: documents split at "---" lines and kept whole (a block scalar keeps
// its last line break), each converted to JSON with YAML 1.1 scalars.
// Empty documents are skipped.
func Decode(stream []byte) ([]map[string]any, error) {
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	var out []map[string]any
	for {
		var obj map[string]any
		err := d.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("object %d of the stream: %w", len(out)+1, err)
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
}

// FromUnstructured turns objects into what Decode returns for their JSON,
// so in-memory objects compare with printed ones (numbers as float64).
func FromUnstructured(objs []*unstructured.Unstructured) ([]map[string]any, error) {
	out := make([]map[string]any, 0, len(objs))
	for _, o := range objs {
		js, err := json.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(js, &m); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// Diff compares two lists of objects, matched by kind, namespace and name,
// and returns one line per difference: an object only one side has, or a
// field whose values differ (strings byte for byte, both quoted). wantName
// and gotName name the two sides in the messages. Order does not matter;
// an object that appears twice on one side is a difference.
func Diff(wantName string, want []map[string]any, gotName string, got []map[string]any) []string {
	var out []string
	index := func(name string, objs []map[string]any) map[string]map[string]any {
		m := map[string]map[string]any{}
		for _, o := range objs {
			key := Key(o)
			if _, dup := m[key]; dup {
				out = append(out, fmt.Sprintf("%s prints %s twice", name, key))
			}
			m[key] = o
		}
		return m
	}
	w, g := index(wantName, want), index(gotName, got)
	for _, key := range slices.Sorted(maps.Keys(w)) {
		o, ok := g[key]
		if !ok {
			out = append(out, fmt.Sprintf("%s prints %s, %s does not", wantName, key, gotName))
			continue
		}
		for _, d := range diffValues("", w[key], o) {
			out = append(out, fmt.Sprintf("%s: %s\n  %s: %s\n  %s: %s", key, d.path, wantName, d.want, gotName, d.got))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(g)) {
		if _, ok := w[key]; !ok {
			out = append(out, fmt.Sprintf("%s prints %s, %s does not", gotName, key, wantName))
		}
	}
	return out
}

// Key names an object: "Kind namespace/name".
func Key(obj map[string]any) string {
	u := unstructured.Unstructured{Object: obj}
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}

type valueDiff struct{ path, want, got string }

// diffValues compares two decoded JSON values exactly (strings byte for
// byte, numbers and booleans by value and type) and lists where they differ.
func diffValues(path string, want, got any) []valueDiff {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		var out []valueDiff
		keys := slices.Sorted(maps.Keys(w))
		for _, k := range slices.Sorted(maps.Keys(g)) {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			wv, inW := w[k]
			gv, inG := g[k]
			switch {
			case !inW:
				out = append(out, valueDiff{path + "." + k, "(absent)", fmt.Sprintf("%#v", gv)})
			case !inG:
				out = append(out, valueDiff{path + "." + k, fmt.Sprintf("%#v", wv), "(absent)"})
			default:
				out = append(out, diffValues(path+"."+k, wv, gv)...)
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			break
		}
		var out []valueDiff
		for i := range w {
			out = append(out, diffValues(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	}
	if reflect.DeepEqual(want, got) {
		return nil
	}
	return []valueDiff{{path, fmt.Sprintf("%#v", want), fmt.Sprintf("%#v", got)}}
}
