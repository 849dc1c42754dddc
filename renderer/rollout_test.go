package renderer

import (
	"testing"

	. "github.com/onsi/gomega"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

func TestSameParam(t *testing.T) {
	g := NewWithT(t)
	g.Expect(SameParam("104857600", "100mb")).To(BeTrue())
	g.Expect(SameParam("100000000", "100m")).To(BeTrue())
	g.Expect(SameParam("allkeys-lru", "ALLKEYS-LRU")).To(BeTrue())
	g.Expect(SameParam("104857600", "200mb")).To(BeFalse())
	g.Expect(SameParam("100zz", "100mb")).To(BeFalse())
}

func TestConfigChange(t *testing.T) {
	g := NewWithT(t)
	cfg := func(kv ...string) map[string]cachev1alpha1.ConfigValue {
		m := map[string]cachev1alpha1.ConfigValue{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = cachev1alpha1.ConfigValue(kv[i+1])
		}
		return m
	}
	live, restart := ConfigChange(cfg("maxmemory", "1mb"), cfg("maxmemory", "2mb", "timeout", "5"))
	g.Expect(live).To(Equal(map[string]string{"maxmemory": "2mb", "timeout": "5"}))
	g.Expect(restart).To(BeFalse())
	live, restart = ConfigChange(cfg(), cfg("databases", "32"))
	g.Expect(live).To(BeEmpty())
	g.Expect(restart).To(BeTrue(), "a restart-only parameter")
	_, restart = ConfigChange(cfg("maxmemory", "1mb"), cfg())
	g.Expect(restart).To(BeTrue(), "a removed parameter returns to its default only at a restart")
	g.Expect(RestartConfigHash(cfg("maxmemory", "1mb"))).To(BeEmpty(), "live parameters are not in the template")
	g.Expect(RestartConfigHash(cfg("databases", "32"))).NotTo(Equal(RestartConfigHash(cfg("databases", "16"))))
}
