package renderer

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// BenchmarkRender compares a render served from the cache with the baseline
// of running Helm's engine every time, as a reconcile without the cache
// would. `make bench` reports the ratio.
func BenchmarkRender(b *testing.B) {
	cc := loadExamples(b)["production"]
	caps := DefaultCapabilities()
	r, err := New()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			values, err := Values(cc)
			if err != nil {
				b.Fatal(err)
			}
			data, err := yaml.Marshal(values)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.render(data, caps); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Render(cc, caps); err != nil {
				b.Fatal(err)
			}
		}
	})
}
