package recommend

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// A recommended value keeps the type and the quoting of the one it
// replaces: replicas stays an integer (the API server refuses "4"), a
// quoted string stays quoted, a plain one plain.
func TestEditKeepsTypeAndQuoting(t *testing.T) {
	tests := []struct {
		name, field, current, recommended string
		in, want                          string
	}{
		{name: "an integer stays an integer", field: "spec.replicas", current: "3", recommended: "4",
			in: "  replicas: 3\n", want: "  replicas: 4 # raised from 3 by kubectl cache recommend\n"},
		{name: "a plain string stays plain", field: "spec.config.maxmemory", current: "100mb", recommended: "152mb",
			in: "  config:\n    maxmemory: 100mb\n", want: "    maxmemory: 152mb # raised from 100mb by kubectl cache recommend\n"},
		{name: "a quoted string stays quoted", field: "spec.config.maxmemory", current: "100mb", recommended: "152mb",
			in: "  config:\n    maxmemory: \"100mb\"\n", want: "    maxmemory: \"152mb\" # raised from 100mb by kubectl cache recommend\n"},
		{name: "a sharded cluster's shard count stays an integer", field: "spec.shards", current: "3", recommended: "5",
			in: "  mode: sharded\n  shards: 3\n", want: "  shards: 5 # raised from 3 by kubectl cache recommend\n"},
		{name: "bytes as an integer become a string with a unit", field: "spec.config.maxmemory", current: "100mb", recommended: "152mb",
			in: "  config:\n    maxmemory: 104857600\n", want: "    maxmemory: 152mb # raised from 100mb by kubectl cache recommend\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			doc := "apiVersion: cache.cacheops.io/v1alpha1\nkind: CacheCluster\nmetadata:\n  name: shop\nspec:\n  version: \"7.0.15\"\n" + tt.in
			out, applied, err := Edit([]byte(doc), "prod", "shop", []cachev1alpha1.Recommendation{{Field: tt.field, Current: tt.current, Recommended: tt.recommended}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(applied).To(HaveLen(1))
			g.Expect(string(out)).To(ContainSubstring(tt.want))
			// What the API server would decode.
			cc := &cachev1alpha1.CacheCluster{}
			g.Expect(yaml.UnmarshalStrict(out, cc)).To(Succeed(), string(out))
			switch tt.field {
			case "spec.replicas":
				g.Expect(cc.Spec.Replicas).To(HaveValue(BeEquivalentTo(4)))
			case "spec.shards":
				g.Expect(cc.Spec.Shards).To(HaveValue(BeEquivalentTo(5)))
			default:
				g.Expect(strings.ToLower(string(cc.Spec.Config["maxmemory"]))).To(Equal("152mb"))
			}
		})
	}
}
