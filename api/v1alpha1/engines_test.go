package v1alpha1

import (
	"os"
	"strings"
	"testing"
)

// The CRD's CEL rules on the spec list the same engine versions and
// unknown parameters as EngineVersions.
func TestEngineRulesMirrorTheTable(t *testing.T) {
	src, err := os.ReadFile("cachecluster_types.go")
	if err != nil {
		t.Fatal(err)
	}
	markers := string(src)
	for _, rule := range append([]string{engineVersionRule()}, engineConfigRules()...) {
		if !strings.Contains(markers, `rule="`+rule+`"`) {
			t.Errorf("cachecluster_types.go has no XValidation marker with\n  rule=%q", rule)
		}
	}
	if !strings.Contains(markers, "supported: "+SupportedEngineVersions()+" (docs/engines.md)") {
		t.Errorf("the version rule's message does not list %s", SupportedEngineVersions())
	}
}

func TestLookupEngineVersion(t *testing.T) {
	tests := []struct {
		name    string
		engine  Engine
		version string
		wantRDB int
		wantOK  bool
	}{
		{"redis by default", "", "7.0.15", 10, true},
		{"redis 7.0.15", EngineRedis, "7.0.15", 10, true},
		{"valkey 8.0.1", EngineValkey, "8.0.1", 11, true},
		{"redis 6.2.14", EngineRedis, "6.2.14", 9, true},
		{"valkey has no 7.0.15", EngineValkey, "7.0.15", 0, false},
		{"a made-up redis version", EngineRedis, "7.2.4", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, ok := LookupEngineVersion(tt.engine, tt.version)
			if ok != tt.wantOK || ev.RDBVersion != tt.wantRDB {
				t.Errorf("got %v %v, want RDB %d %v", ev, ok, tt.wantRDB, tt.wantOK)
			}
		})
	}
	if err := UnsupportedEngineVersion("", "7.2.4").Error(); err != "engine redis version 7.2.4 is not supported; supported: redis 6.2.14, redis 7.0.15, valkey 8.0.1" {
		t.Errorf("message: %s", err)
	}
}

func TestCheckEngineConfig(t *testing.T) {
	old, _ := LookupEngineVersion(EngineRedis, "6.2.14")
	if err := CheckEngineConfig(old, map[string]ConfigValue{"maxmemory-clients": "10%", "latency-tracking": "yes", "maxmemory": "1mb"}); err == nil ||
		err.Error() != "redis 6.2.14 has no parameter latency-tracking, maxmemory-clients; remove it from spec.config or choose a newer version" {
		t.Errorf("got %v", err)
	}
	for _, ev := range EngineVersions {
		for _, k := range ev.Unknown {
			if _, ok := ConfigParameters[k]; !ok {
				t.Errorf("%s: unknown parameter %s is not one spec.config accepts", ev, k)
			}
		}
		for k := range ev.Renamed {
			if _, ok := ConfigParameters[k]; !ok {
				t.Errorf("%s: renamed parameter %s is not one spec.config accepts", ev, k)
			}
		}
	}
	now, _ := LookupEngineVersion(EngineValkey, "8.0.1")
	if err := CheckEngineConfig(now, map[string]ConfigValue{"maxmemory-clients": "10%"}); err != nil {
		t.Error(err)
	}
}
