package recommend

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

// Edit sets the recommended values in the document of CacheCluster
// namespace/name of a multi-document YAML file and returns the file and
// the recommendations it applied (a value the manifest holds already is
// skipped). yaml.v3's node tree keeps comments, key order and quoting;
// only the changed values differ, each with a line comment saying so. A
// recommendation made for another value than the manifest holds is stale:
// an error, and nothing is applied.
func Edit(data []byte, namespace, name string, recs []cachev1alpha1.Recommendation) ([]byte, []cachev1alpha1.Recommendation, error) {
	docs, err := decodeDocuments(data)
	if err != nil {
		return nil, nil, err
	}
	target := findCluster(docs, namespace, name)
	if target == nil {
		return nil, nil, fmt.Errorf("no CacheCluster %s in it", name)
	}
	var applied []cachev1alpha1.Recommendation
	for _, r := range recs {
		ok, err := apply(target, r)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			applied = append(applied, r)
		}
	}
	out, err := encodeDocuments(docs)
	if err != nil {
		return nil, nil, err
	}
	return out, applied, nil
}

func decodeDocuments(data []byte) ([]*yaml3.Node, error) {
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	var docs []*yaml3.Node
	for {
		var n yaml3.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return nil, err
		}
		docs = append(docs, &n)
	}
}

// findCluster returns the root mapping of the last document that is
// CacheCluster name in namespace (a document without a namespace matches
// any), or nil.
func findCluster(docs []*yaml3.Node, namespace, name string) *yaml3.Node {
	var target *yaml3.Node
	for _, d := range docs {
		if len(d.Content) == 0 {
			continue
		}
		root := d.Content[0]
		if scalar(lookup(root, "kind")) != "CacheCluster" || scalar(lookup(root, "metadata", "name")) != name {
			continue
		}
		if ns := scalar(lookup(root, "metadata", "namespace")); ns != "" && namespace != "" && ns != namespace {
			continue
		}
		target = root
	}
	return target
}

// apply sets one recommended value in the CacheCluster's root mapping and
// tells whether it changed anything.
func apply(root *yaml3.Node, r cachev1alpha1.Recommendation) (bool, error) {
	keys := strings.Split(strings.TrimPrefix(r.Field, "spec."), ".")
	node := ensure(root, append([]string{"spec"}, keys...)...)
	if renderer.SameParam(node.Value, r.Recommended) {
		return false, nil
	}
	if node.Kind != yaml3.ScalarNode || !renderer.SameParam(node.Value, r.Current) {
		// The manifest moved on since the evidence was gathered.
		return false, fmt.Errorf("%s is %q in the manifest but the recommendation was made for %q: it is stale, wait for a new one", r.Field, node.Value, r.Current)
	}
	// The value keeps its type and quoting: an integer stays an integer
	// (replicas: 4, not "4", which the API server refuses), a quoted
	// string stays quoted.
	tag := "!!str"
	if node.Tag == "!!int" && isInt(r.Recommended) {
		tag = "!!int"
	}
	node.Tag, node.Value = tag, r.Recommended
	note := "raised from " + r.Current + " by kubectl cache recommend"
	if node.LineComment != "" {
		node.LineComment += "; " + note
	} else {
		node.LineComment = "# " + note
	}
	return true, nil
}

func encodeDocuments(docs []*yaml3.Node) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml3.NewEncoder(&buf)
	enc.SetIndent(2)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// isInt tells whether s is a plain decimal integer.
func isInt(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}
