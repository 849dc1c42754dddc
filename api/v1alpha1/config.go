package v1alpha1

// ConfigKind says what values a Redis parameter takes; each kind has one
// admission rule on spec.config.
type ConfigKind string

// The kinds of values of the parameters spec.config accepts.
const (
	// ConfigMemory: a byte count with an optional unit as Redis reads it
	// (b, k, kb, m, mb, g, gb, any case): 100mb, 1gb, 1048576.
	ConfigMemory ConfigKind = "memory"
	// ConfigBool: yes or no.
	ConfigBool ConfigKind = "bool"
	// ConfigInt: a whole number in the parameter's range (ConfigRanges).
	ConfigInt ConfigKind = "int"
	// ConfigEnum: one word of a fixed list (ConfigEnums).
	ConfigEnum ConfigKind = "enum"
	// ConfigSpecial: a format of its own (save, notify-keyspace-events,
	// client-output-buffer-limit, maxmemory-clients, appendfilename).
	ConfigSpecial ConfigKind = "special"
)

// StartupMasterHost and StartupMasterPort are what every pod's redis.conf
// names in "replicaof": an address where nothing listens. A process thus
// starts as a replica that serves reads of what it holds, refuses writes,
// and refuses to be the sync source of another replica (NOMASTERLINK)
// until the operator promotes it or points it at the master. A master
// that restarts in place with less than its replicas hold (the last
// second of its append-only file) cannot replace their data before the
// operator has compared histories (docs/failover.md).
const (
	StartupMasterHost = "127.0.0.1"
	StartupMasterPort = "1"
)

// ConfigParameters are the Redis parameters spec.config accepts, each with
// the kind of its value. It is an allow-list: a parameter missing here is
// refused at admission, so a new or dangerous directive (loadmodule,
// enable-debug-command, ...) needs a decision before anyone can set it.
// Parameters the operator owns (port, dir, replicaof, requirepass, ...) are
// never here. The CRD's CEL rules on spec.config list the same names and
// value rules; a test keeps the two equal.
var ConfigParameters = map[string]ConfigKind{
	// Memory and eviction.
	"maxmemory":                     ConfigMemory,
	"maxmemory-policy":              ConfigEnum,
	"maxmemory-samples":             ConfigInt,
	"maxmemory-eviction-tenacity":   ConfigInt,
	"maxmemory-clients":             ConfigSpecial,
	"lfu-log-factor":                ConfigInt,
	"lfu-decay-time":                ConfigInt,
	"lazyfree-lazy-eviction":        ConfigBool,
	"lazyfree-lazy-expire":          ConfigBool,
	"lazyfree-lazy-server-del":      ConfigBool,
	"lazyfree-lazy-user-del":        ConfigBool,
	"lazyfree-lazy-user-flush":      ConfigBool,
	"replica-lazy-flush":            ConfigBool,
	"activedefrag":                  ConfigBool,
	"active-defrag-ignore-bytes":    ConfigMemory,
	"active-defrag-threshold-lower": ConfigInt,
	"active-defrag-threshold-upper": ConfigInt,
	"active-defrag-cycle-min":       ConfigInt,
	"active-defrag-cycle-max":       ConfigInt,
	"active-defrag-max-scan-fields": ConfigInt,
	"activerehashing":               ConfigBool,
	"jemalloc-bg-thread":            ConfigBool,
	// Clients and networking.
	"timeout":                    ConfigInt,
	"tcp-keepalive":              ConfigInt,
	"tcp-backlog":                ConfigInt,
	"maxclients":                 ConfigInt,
	"client-query-buffer-limit":  ConfigMemory,
	"client-output-buffer-limit": ConfigSpecial,
	"proto-max-bulk-len":         ConfigMemory,
	"io-threads":                 ConfigInt,
	"io-threads-do-reads":        ConfigBool,
	"hz":                         ConfigInt,
	"dynamic-hz":                 ConfigBool,
	"busy-reply-threshold":       ConfigInt,
	"lua-time-limit":             ConfigInt,
	"tracking-table-max-keys":    ConfigInt,
	"notify-keyspace-events":     ConfigSpecial,
	"databases":                  ConfigInt,
	// Logging and monitoring (the log file is the operator's).
	"loglevel":                  ConfigEnum,
	"slowlog-log-slower-than":   ConfigInt,
	"slowlog-max-len":           ConfigInt,
	"latency-monitor-threshold": ConfigInt,
	"latency-tracking":          ConfigBool,
	// Persistence (where the files go is the operator's).
	"appendonly":                    ConfigBool,
	"appendfsync":                   ConfigEnum,
	"appendfilename":                ConfigSpecial,
	"no-appendfsync-on-rewrite":     ConfigBool,
	"auto-aof-rewrite-percentage":   ConfigInt,
	"auto-aof-rewrite-min-size":     ConfigMemory,
	"aof-load-truncated":            ConfigBool,
	"aof-use-rdb-preamble":          ConfigBool,
	"aof-rewrite-incremental-fsync": ConfigBool,
	"aof-timestamp-enabled":         ConfigBool,
	"save":                          ConfigSpecial,
	"stop-writes-on-bgsave-error":   ConfigBool,
	"rdbcompression":                ConfigBool,
	"rdbchecksum":                   ConfigBool,
	"rdb-save-incremental-fsync":    ConfigBool,
	// Replication (who replicates from whom is the operator's).
	"repl-backlog-size":               ConfigMemory,
	"repl-backlog-ttl":                ConfigInt,
	"repl-timeout":                    ConfigInt,
	"repl-ping-replica-period":        ConfigInt,
	"repl-diskless-sync":              ConfigBool,
	"repl-diskless-sync-delay":        ConfigInt,
	"repl-diskless-sync-max-replicas": ConfigInt,
	"repl-diskless-load":              ConfigEnum,
	"repl-disable-tcp-nodelay":        ConfigBool,
	"replica-serve-stale-data":        ConfigBool,
	"replica-read-only":               ConfigBool,
	"replica-priority":                ConfigInt,
	"min-replicas-to-write":           ConfigInt,
	"min-replicas-max-lag":            ConfigInt,
	// Data structure encodings.
	"hash-max-listpack-entries": ConfigInt,
	"hash-max-listpack-value":   ConfigInt,
	"list-max-listpack-size":    ConfigInt,
	"list-compress-depth":       ConfigInt,
	"set-max-intset-entries":    ConfigInt,
	"zset-max-listpack-entries": ConfigInt,
	"zset-max-listpack-value":   ConfigInt,
	"hll-sparse-max-bytes":      ConfigInt,
	"stream-node-max-bytes":     ConfigMemory,
	"stream-node-max-entries":   ConfigInt,
}

// ConfigRanges are the smallest and largest value of every ConfigInt
// parameter, as Redis 7.0 checks them (INT_MAX where Redis only asks for a
// positive or non-negative number).
var ConfigRanges = map[string][2]int64{
	"maxmemory-samples": {1, 64}, "maxmemory-eviction-tenacity": {0, 100},
	"lfu-log-factor": {0, 2147483647}, "lfu-decay-time": {0, 2147483647},
	"active-defrag-threshold-lower": {0, 1000}, "active-defrag-threshold-upper": {0, 1000},
	"active-defrag-cycle-min": {1, 99}, "active-defrag-cycle-max": {1, 99},
	"active-defrag-max-scan-fields": {1, 2147483647},
	"timeout":                       {0, 2147483647}, "tcp-keepalive": {0, 2147483647}, "tcp-backlog": {0, 2147483647},
	"maxclients": {1, 2147483647}, "io-threads": {1, 128}, "hz": {1, 500},
	"busy-reply-threshold": {0, 2147483647}, "lua-time-limit": {0, 2147483647},
	"tracking-table-max-keys": {0, 2147483647}, "databases": {1, 2147483647},
	"slowlog-log-slower-than": {-1, 2147483647}, "slowlog-max-len": {0, 2147483647},
	"latency-monitor-threshold": {0, 2147483647}, "auto-aof-rewrite-percentage": {0, 2147483647},
	"repl-backlog-ttl": {0, 2147483647}, "repl-timeout": {1, 2147483647},
	"repl-ping-replica-period": {1, 2147483647}, "repl-diskless-sync-delay": {0, 2147483647},
	"repl-diskless-sync-max-replicas": {0, 2147483647}, "replica-priority": {0, 2147483647},
	"min-replicas-to-write": {0, 2147483647}, "min-replicas-max-lag": {0, 2147483647},
	"hash-max-listpack-entries": {0, 2147483647}, "hash-max-listpack-value": {0, 2147483647},
	"list-max-listpack-size": {-5, 2147483647}, "list-compress-depth": {0, 2147483647},
	"set-max-intset-entries": {0, 2147483647}, "zset-max-listpack-entries": {0, 2147483647},
	"zset-max-listpack-value": {0, 2147483647}, "hll-sparse-max-bytes": {0, 2147483647},
	"stream-node-max-entries": {0, 2147483647},
}

// ConfigEnums are the words every ConfigEnum parameter accepts.
var ConfigEnums = map[string][]string{
	"maxmemory-policy":   {"volatile-lru", "allkeys-lru", "volatile-lfu", "allkeys-lfu", "volatile-random", "allkeys-random", "volatile-ttl", "noeviction"},
	"appendfsync":        {"always", "everysec", "no"},
	"loglevel":           {"debug", "verbose", "notice", "warning"},
	"repl-diskless-load": {"disabled", "on-empty-db", "swapdb"},
}

// MaxMemoryShare is the largest part of spec.resources.limits.memory that
// config maxmemory may take. The rest is headroom Redis needs beyond its
// dataset: client and replication buffers, allocator fragmentation and the
// copy-on-write pages of a background save (every backup and full resync
// forks). It is the same 25 % that managed services reserve by default.
const MaxMemoryShare = 0.75
