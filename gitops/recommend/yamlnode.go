package recommend

import yaml3 "go.yaml.in/yaml/v3"

// lookup returns the value node at keys of nested mappings, or nil.
func lookup(n *yaml3.Node, keys ...string) *yaml3.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yaml3.MappingNode {
			return nil
		}
		var next *yaml3.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

// scalar is the value of a node, empty for none.
func scalar(n *yaml3.Node) string {
	if n == nil {
		return ""
	}
	return n.Value
}

// ensure returns the value node at keys, creating mappings on the way.
func ensure(n *yaml3.Node, keys ...string) *yaml3.Node {
	for _, k := range keys {
		next := lookup(n, k)
		if next == nil {
			next = &yaml3.Node{Kind: yaml3.MappingNode, Tag: "!!map"}
			n.Content = append(n.Content, &yaml3.Node{Kind: yaml3.ScalarNode, Tag: "!!str", Value: k}, next)
		}
		n = next
	}
	return n
}
