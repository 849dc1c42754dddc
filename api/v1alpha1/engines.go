package v1alpha1

import (
	"fmt"
	"sort"
	"strings"
)

// Engine is the Redis-compatible server a cluster runs.
// +kubebuilder:validation:Enum=redis;valkey
type Engine string

// The engines cacheops runs.
const (
	EngineRedis  Engine = "redis"
	EngineValkey Engine = "valkey"
)

// EngineOrDefault is e, or redis when e is empty (objects stored before
// spec.engine existed, values built in tests).
func EngineOrDefault(e Engine) Engine {
	if e == "" {
		return EngineRedis
	}
	return e
}

// EngineVersion is one engine version cacheops supports: what it is called
// in images and on a command line, which RDB format it writes, and how its
// configuration dialect differs from the parameter names spec.config uses
// (those of Redis 7.0).
type EngineVersion struct {
	Engine  Engine
	Version string
	// Repository is the image repository; the image is Repository:Version
	// unless spec.image overrides it.
	Repository string
	// Server and CLI are the program names in the image.
	Server, CLI string
	// RDBVersion is the RDB format version the server writes. It reads
	// that version and older ones, never a newer one: a replica whose RDB
	// version is lower than its master's cannot do a full resync, and a
	// server cannot load a dump or AOF base a newer version wrote.
	RDBVersion int
	// Unknown are spec.config parameters this version has no directive
	// for. A spec that sets one is refused at admission.
	Unknown []string
	// Renamed maps spec.config parameters to the older name this version
	// knows them by; the renderer writes the old name.
	Renamed map[string]string
	// AppendDirName: the version keeps its append-only files in a folder
	// (multi-part AOF, Redis 7.0+), so redis.conf carries appenddirname.
	AppendDirName bool
}

// EngineVersions is the table of supported engine versions. Verified on
// this project's test machines with the real binaries (a dump's header,
// redis-check-rdb, every spec.config parameter given to the server):
// redis 7.0.15 (Debian bookworm's redis-server) writes RDB 10 and knows
// every parameter; valkey 8.0.1 (bookworm-backports' valkey-server) writes
// RDB 11 and knows every parameter; redis-check-rdb 7.0.15 refuses an RDB
// 11 file ("Can't handle RDB format version 11"). Redis 6.2.14 is not
// installed there: its row comes from Redis 6.2's redis.conf and the Redis
// 7.0 release notes (RDB 9; multi-part AOF, the listpack parameter names,
// busy-reply-threshold, maxmemory-clients and the others below are 7.0).
var EngineVersions = []EngineVersion{
	{
		Engine: EngineRedis, Version: "6.2.14", Repository: "redis", Server: "redis-server", CLI: "redis-cli", RDBVersion: 9,
		Unknown: []string{"aof-timestamp-enabled", "latency-tracking", "maxmemory-clients", "repl-diskless-sync-max-replicas"},
		Renamed: map[string]string{
			"busy-reply-threshold":      "lua-time-limit",
			"hash-max-listpack-entries": "hash-max-ziplist-entries",
			"hash-max-listpack-value":   "hash-max-ziplist-value",
			"list-max-listpack-size":    "list-max-ziplist-size",
			"zset-max-listpack-entries": "zset-max-ziplist-entries",
			"zset-max-listpack-value":   "zset-max-ziplist-value",
		},
	},
	{Engine: EngineRedis, Version: "7.0.15", Repository: "redis", Server: "redis-server", CLI: "redis-cli", RDBVersion: 10, AppendDirName: true},
	{Engine: EngineValkey, Version: "8.0.1", Repository: "valkey/valkey", Server: "valkey-server", CLI: "valkey-cli", RDBVersion: 11, AppendDirName: true},
}

// LookupEngineVersion finds a row of EngineVersions; an empty engine is
// redis.
func LookupEngineVersion(e Engine, version string) (EngineVersion, bool) {
	e = EngineOrDefault(e)
	for _, ev := range EngineVersions {
		if ev.Engine == e && ev.Version == version {
			return ev, true
		}
	}
	return EngineVersion{}, false
}

// String names the row as people write it: "valkey 8.0.1".
func (ev EngineVersion) String() string { return string(ev.Engine) + " " + ev.Version }

// SupportedEngineVersions lists the table for messages: "redis 6.2.14,
// redis 7.0.15, valkey 8.0.1".
func SupportedEngineVersions() string {
	names := make([]string, 0, len(EngineVersions))
	for _, ev := range EngineVersions {
		names = append(names, ev.String())
	}
	return strings.Join(names, ", ")
}

// UnsupportedEngineVersion is the message for an engine and version the
// table does not have.
func UnsupportedEngineVersion(e Engine, version string) error {
	return fmt.Errorf("engine %s version %s is not supported; supported: %s", EngineOrDefault(e), version, SupportedEngineVersions())
}

// CheckEngineConfig says which parameters of config the version has no
// directive for; nil when it knows them all.
func CheckEngineConfig(ev EngineVersion, config map[string]ConfigValue) error {
	var bad []string
	for _, k := range ev.Unknown {
		if _, ok := config[k]; ok {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("%s has no parameter %s; remove it from spec.config or choose a newer version", ev, strings.Join(bad, ", "))
}

// engineVersionRule and engineConfigRules are the CEL rules on the spec
// that mirror the table; cachecluster_types.go carries them as markers and
// a test keeps the two equal.
func engineVersionRule() string {
	keys := make([]string, 0, len(EngineVersions))
	for _, ev := range EngineVersions {
		keys = append(keys, "'"+string(ev.Engine)+" "+ev.Version+"'")
	}
	return "(has(self.engine) ? self.engine : 'redis') + ' ' + self.version in [" + strings.Join(keys, ", ") + "]"
}

func engineConfigRules() []string {
	var rules []string
	for _, ev := range EngineVersions {
		if len(ev.Unknown) == 0 {
			continue
		}
		list := "['" + strings.Join(ev.Unknown, "', '") + "']"
		rules = append(rules, fmt.Sprintf("(has(self.engine) ? self.engine : 'redis') + ' ' + self.version != '%s' || !has(self.config) || self.config.all(k, !(k in %s))", ev, list))
	}
	return rules
}
