package schemagen

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
)

func crdPath(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "charts", "cacheops", "crds", name)
}

// Strings made for a pattern match it, for every pattern the CRDs use.
func TestMatchingHonoursPatterns(t *testing.T) {
	g := New(1)
	for _, p := range []string{
		`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`,
		`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`,
		`^[A-Za-z0-9.-]+(:[0-9]{1,5})?$`,
		`^[0-9]+\.[0-9]+(\.[0-9]+)?$`,
		`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`,
		`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`,
	} {
		c := g.pattern(p)
		for range 200 {
			if v := matching(g.r, c.syntax, 4); !c.re.MatchString(v) {
				t.Fatalf("pattern %s: generated %q does not match", p, v)
			}
		}
	}
}

// The same seed gives the same objects, so a failure can be replayed.
func TestObjectsAreDeterministic(t *testing.T) {
	crd, err := LoadCRD(crdPath("cache.cacheops.io_cacheclusters.yaml"), "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	gen := func() []byte {
		g := New(42)
		var objs []map[string]any
		for range 50 {
			objs = append(objs, g.Object(crd, "c", "ns"))
		}
		b, err := json.Marshal(objs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if a, b := gen(), gen(); !reflect.DeepEqual(a, b) {
		t.Fatal("two generators with one seed made different objects")
	}
}
