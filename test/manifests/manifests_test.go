package manifests

import (
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: team}\ndata:\n  redis.conf: |\n    port 6379\n"
	for _, tc := range []struct {
		name      string
		want, got string
		wantDiffs []string // substrings, one per difference
	}{
		{name: "equal, comments and separators aside", want: "---\n# Source: x\n" + cm, got: cm + "---\n"},
		{name: "a block scalar loses its last line break", want: cm, got: strings.Replace(cm, "|\n", "|-\n", 1),
			wantDiffs: []string{`ConfigMap team/c: .data.redis.conf` + "\n" + `  helm: "port 6379\n"` + "\n" + `  render: "port 6379"`}},
		{name: "yes is a boolean, as kubectl reads it", want: cm + "immutable: yes\n", got: cm + "immutable: 'yes'\n",
			wantDiffs: []string{`.immutable`}},
		{name: "an object only one side has", want: cm + "---\n" + strings.Replace(cm, "name: c", "name: d", 1), got: cm,
			wantDiffs: []string{"helm prints ConfigMap team/d, render does not"}},
		{name: "a number is not a string", want: cm + "x: 1\n", got: cm + "x: '1'\n", wantDiffs: []string{".x"}},
		{name: "a field only one side has", want: cm, got: cm + "immutable: false\n", wantDiffs: []string{".immutable\n  helm: (absent)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := Decode([]byte(tc.want))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode([]byte(tc.got))
			if err != nil {
				t.Fatal(err)
			}
			diffs := Diff("helm", want, "render", got)
			if len(diffs) != len(tc.wantDiffs) {
				t.Fatalf("got %d differences, want %d:\n%s", len(diffs), len(tc.wantDiffs), strings.Join(diffs, "\n"))
			}
			for i, d := range diffs {
				if !strings.Contains(d, tc.wantDiffs[i]) {
					t.Errorf("difference %q does not contain %q", d, tc.wantDiffs[i])
				}
			}
		})
	}
}
