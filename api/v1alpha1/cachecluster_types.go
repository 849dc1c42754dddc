package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxReplicas is the largest number of Redis pods one CacheCluster may have.
// One master feeding more than this many replicas spends most of its network
// on replication; a bigger cache wants sharding, not more replicas.
const MaxReplicas = 15

// CacheClusterSpec is what the team wants, as committed to git. The operator
// never writes it.
//
// +kubebuilder:validation:XValidation:rule="!has(self.backup) || !has(self.backup.enabled) || !self.backup.enabled || (has(self.backup.schedule) && size(self.backup.schedule) > 0)",message="backup.schedule is required when backup.enabled is true"
// +kubebuilder:validation:XValidation:rule="!has(self.config) || !('maxmemory' in self.config) || !self.config['maxmemory'].matches('^[0-9]{1,15}([kKmMgG][bB]?|[bB])?$') || !has(self.resources) || !has(self.resources.limits) || !('memory' in self.resources.limits) || !string(self.resources.limits['memory']).matches('^[0-9]{1,18}([.][0-9]{1,9})?([KMGTPE]i|[numkMGTPE])?$') || double(self.config['maxmemory'].find('^[0-9]+')) * (self.config['maxmemory'].lowerAscii().endsWith('gb') ? 1073741824.0 : self.config['maxmemory'].lowerAscii().endsWith('mb') ? 1048576.0 : self.config['maxmemory'].lowerAscii().endsWith('kb') ? 1024.0 : self.config['maxmemory'].lowerAscii().endsWith('g') ? 1e9 : self.config['maxmemory'].lowerAscii().endsWith('m') ? 1e6 : self.config['maxmemory'].lowerAscii().endsWith('k') ? 1e3 : 1.0) <= 0.75 * quantity(string(self.resources.limits['memory'])).asApproximateFloat()",messageExpression="'config maxmemory ' + self.config['maxmemory'] + ' does not fit in resources.limits.memory ' + string(self.resources.limits['memory']) + ': Redis needs a quarter of the limit for buffers and the copy-on-write pages of a background save, so maxmemory may be at most 75% of the limit'"
// +kubebuilder:validation:XValidation:rule="has(self.restore) == has(oldSelf.restore) && (!has(self.restore) || self.restore == oldSelf.restore)",message="spec.restore is immutable: it applies only when a cluster is created; create a new CacheCluster to restore another backup"
// +kubebuilder:validation:XValidation:rule="self.mode == oldSelf.mode",message="spec.mode is immutable: a cluster cannot move between replication and sharded in place; create a new CacheCluster with the mode you want and move the data to it"
// +kubebuilder:validation:XValidation:rule="self.mode == 'sharded' || (!has(self.shards) && !has(self.replicasPerShard))",message="spec.shards and spec.replicasPerShard apply only to mode: sharded; a replication cluster sizes itself with spec.replicas"
// +kubebuilder:validation:XValidation:rule="self.mode != 'sharded' || has(self.shards)",message="a sharded cluster needs spec.shards, the number of masters the 16384 slots are spread over (at least 3)"
// +kubebuilder:validation:XValidation:rule="self.mode != 'sharded' || !has(self.replicas) || self.replicas == 3",message="spec.replicas and spec.shards cannot be set together: a sharded cluster has spec.shards × (1 + spec.replicasPerShard) pods; remove spec.replicas"
// +kubebuilder:validation:XValidation:rule="self.mode != 'sharded' || !has(self.backup) || !has(self.backup.autoRestore) || !self.backup.autoRestore",message="backup.autoRestore (disaster recovery in place) is not supported for a sharded cluster: restore a backup into a new sharded CacheCluster with spec.restore instead (docs/backup.md)"
// +kubebuilder:validation:XValidation:rule="self.mode != 'sharded' || !has(self.restore) || !has(self.restore.key) || self.restore.key.endsWith('/')",message="a sharded cluster restores a sharded cluster's backup: restore.key names the backup's folder and ends in / (such as prod/shop/sessions/sessions-20261130030000/); a key of one dump (.rdb) is a replication cluster's backup, which a cluster with mode: replication restores"
// +kubebuilder:validation:XValidation:rule="self.mode == 'sharded' || !has(self.restore) || !has(self.restore.key) || !self.restore.key.endsWith('/')",message="restore.key ends in /, so it names a sharded cluster's backup (a folder of one dump per shard): restore it into a cluster with mode: sharded and the backup's shard count"
// +kubebuilder:validation:XValidation:rule="(has(self.replicasPerShard) ? self.replicasPerShard : 1) == (has(oldSelf.replicasPerShard) ? oldSelf.replicasPerShard : 1)",message="spec.replicasPerShard cannot change yet (issue 15): adding or removing replicas of a shard is not supported; create a new sharded CacheCluster with the replica count you want"
// +kubebuilder:validation:XValidation:rule="(has(self.engine) ? self.engine : 'redis') + ' ' + self.version in ['redis 6.2.14', 'redis 7.0.15', 'valkey 8.0.1']",messageExpression="'engine ' + (has(self.engine) ? self.engine : 'redis') + ' version ' + self.version + ' is not supported; supported: redis 6.2.14, redis 7.0.15, valkey 8.0.1 (docs/engines.md)'"
// +kubebuilder:validation:XValidation:rule="(has(self.engine) ? self.engine : 'redis') + ' ' + self.version != 'redis 6.2.14' || !has(self.config) || self.config.all(k, !(k in ['aof-timestamp-enabled', 'latency-tracking', 'maxmemory-clients', 'repl-diskless-sync-max-replicas']))",messageExpression="'redis 6.2.14 has no parameter ' + self.config.filter(k, k in ['aof-timestamp-enabled', 'latency-tracking', 'maxmemory-clients', 'repl-diskless-sync-max-replicas'])[0] + '; remove it from spec.config or choose a newer version'"
// +kubebuilder:validation:XValidation:rule="(has(self.tls) && has(self.tls.enabled) && self.tls.enabled) == (has(oldSelf.tls) && has(oldSelf.tls.enabled) && oldSelf.tls.enabled)",message="spec.tls.enabled cannot change on an existing cluster: replicas with and without TLS cannot replicate from each other. Create a new CacheCluster with the setting you want and restore a backup into it (docs/security.md)"
// +kubebuilder:validation:XValidation:rule="(has(self.tls) && has(self.tls.issuerRef)) == (has(oldSelf.tls) && has(oldSelf.tls.issuerRef)) && (!has(self.tls) || !has(self.tls.issuerRef) || self.tls.issuerRef == oldSelf.tls.issuerRef)",message="spec.tls.issuerRef cannot change on an existing cluster: its pods trust one CA, and a certificate from another would cut replication while they reload. Create a new CacheCluster with the issuer you want and restore a backup into it (docs/security.md)"
type CacheClusterSpec struct {
	// Engine is the server: redis (the default) or valkey. With version it
	// selects a row of the supported engine versions (docs/engines.md):
	// the image (redis:<version> or valkey/valkey:<version>), the
	// configuration dialect and the RDB format. Changing it is a rolling
	// migration ordered by what can replicate from what.
	// +optional
	// +kubebuilder:default=redis
	Engine Engine `json:"engine,omitempty"`

	// Version is the engine version to run, e.g. "7.0.15" for redis or
	// "8.0.1" for valkey. It selects the image unless image is set.
	// +kubebuilder:validation:Pattern=`^[0-9]+\.[0-9]+(\.[0-9]+)?$`
	// +kubebuilder:validation:MaxLength=32
	Version string `json:"version"`

	// Image overrides the container image. It must hold the engine's
	// programs (redis-server and redis-cli, or valkey-server and
	// valkey-cli) at the version named by version: the configuration
	// dialect and the upgrade order follow engine and version, not the
	// image.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// Mode is replication (one master and its replicas, all holding every
	// key) or sharded (the Redis Cluster protocol: the 16384 hash slots
	// spread over spec.shards masters, each with its replicas). It cannot
	// change after creation.
	// +optional
	// +kubebuilder:default=replication
	Mode ClusterMode `json:"mode,omitempty"`

	// Shards is the number of masters of a sharded cluster (mode: sharded
	// only). A change moves hash slots between the shards (resharding,
	// docs/sharded.md): a new shard's pods are added first, a removed
	// shard's pods go only once its slots and keys have moved.
	// +optional
	// +kubebuilder:validation:Minimum=3
	// +kubebuilder:validation:Maximum=64
	Shards *int32 `json:"shards,omitempty"`

	// ReplicasPerShard is the number of replicas of each shard's master
	// (mode: sharded only); 1 when unset. It cannot change yet.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=5
	ReplicasPerShard *int32 `json:"replicasPerShard,omitempty"`

	// Replicas is the number of Redis pods: one master and replicas-1
	// replicas. A sharded cluster leaves it unset: its pod count is
	// shards × (1 + replicasPerShard).
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=15
	Replicas *int32 `json:"replicas,omitempty"`

	// Resources of the Redis container. Quantities are plain numbers with
	// an optional suffix (500m, 1Gi, 2G): make generate replaces the
	// quantity pattern in the CRD (hack/crd-quantities.sh), so exponents
	// such as 1e9999999999, which decode but no API server can apply, are
	// refused at admission.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Storage of each pod's data directory.
	// +optional
	// +kubebuilder:default={size: "1Gi"}
	Storage StorageSpec `json:"storage,omitempty"`

	// Network says how clients reach the cluster.
	// +optional
	Network NetworkSpec `json:"network,omitempty"`

	// Scheduling says how the pods are spread over nodes and zones.
	// +optional
	Scheduling SchedulingSpec `json:"scheduling,omitempty"`

	// Config holds Redis configuration parameters (redis.conf directives)
	// by name, e.g. maxmemory: "256mb". Only the parameters cacheops
	// supports are accepted, each with a rule for its values
	// (v1alpha1.ConfigParameters; docs/api.md lists them); parameters the
	// operator manages itself (replicaof, port, dir, bind, requirepass, ...)
	// are refused. maxmemory must leave a quarter of
	// resources.limits.memory free.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z][a-z0-9-]*$'))",message="config keys must be lower-case Redis parameter names (letters, digits and '-')"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['replicaof', 'slaveof', 'port', 'tls-port', 'bind', 'dir', 'dbfilename', 'requirepass', 'masterauth', 'masteruser', 'daemonize', 'supervised', 'pidfile', 'logfile', 'unixsocket', 'unixsocketperm', 'include', 'protected-mode', 'rename-command', 'aclfile', 'cluster-enabled', 'cluster-config-file', 'appenddirname', 'replica-announce-ip', 'slave-announce-ip']))",messageExpression="'config key ' + self.filter(k, k in ['replicaof', 'slaveof', 'port', 'tls-port', 'bind', 'dir', 'dbfilename', 'requirepass', 'masterauth', 'masteruser', 'daemonize', 'supervised', 'pidfile', 'logfile', 'unixsocket', 'unixsocketperm', 'include', 'protected-mode', 'rename-command', 'aclfile', 'cluster-enabled', 'cluster-config-file', 'appenddirname', 'replica-announce-ip', 'slave-announce-ip'])[0] + ' is managed by the operator and cannot be set in spec.config'"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['replicaof', 'slaveof', 'port', 'tls-port', 'bind', 'dir', 'dbfilename', 'requirepass', 'masterauth', 'masteruser', 'daemonize', 'supervised', 'pidfile', 'logfile', 'unixsocket', 'unixsocketperm', 'include', 'protected-mode', 'rename-command', 'aclfile', 'cluster-enabled', 'cluster-config-file', 'appenddirname', 'replica-announce-ip', 'slave-announce-ip'] || k in ['active-defrag-cycle-max', 'active-defrag-cycle-min', 'active-defrag-ignore-bytes', 'active-defrag-max-scan-fields', 'active-defrag-threshold-lower', 'active-defrag-threshold-upper', 'activedefrag', 'activerehashing', 'aof-load-truncated', 'aof-rewrite-incremental-fsync', 'aof-timestamp-enabled', 'aof-use-rdb-preamble', 'appendfilename', 'appendfsync', 'appendonly', 'auto-aof-rewrite-min-size', 'auto-aof-rewrite-percentage', 'busy-reply-threshold', 'client-output-buffer-limit', 'client-query-buffer-limit', 'databases', 'dynamic-hz', 'hash-max-listpack-entries', 'hash-max-listpack-value', 'hll-sparse-max-bytes', 'hz', 'io-threads', 'io-threads-do-reads', 'jemalloc-bg-thread', 'latency-monitor-threshold', 'latency-tracking', 'lazyfree-lazy-eviction', 'lazyfree-lazy-expire', 'lazyfree-lazy-server-del', 'lazyfree-lazy-user-del', 'lazyfree-lazy-user-flush', 'lfu-decay-time', 'lfu-log-factor', 'list-compress-depth', 'list-max-listpack-size', 'loglevel', 'lua-time-limit', 'maxclients', 'maxmemory', 'maxmemory-clients', 'maxmemory-eviction-tenacity', 'maxmemory-policy', 'maxmemory-samples', 'min-replicas-max-lag', 'min-replicas-to-write', 'no-appendfsync-on-rewrite', 'notify-keyspace-events', 'proto-max-bulk-len', 'rdb-save-incremental-fsync', 'rdbchecksum', 'rdbcompression', 'repl-backlog-size', 'repl-backlog-ttl', 'repl-disable-tcp-nodelay', 'repl-diskless-load', 'repl-diskless-sync', 'repl-diskless-sync-delay', 'repl-diskless-sync-max-replicas', 'repl-ping-replica-period', 'repl-timeout', 'replica-lazy-flush', 'replica-priority', 'replica-read-only', 'replica-serve-stale-data', 'save', 'set-max-intset-entries', 'slowlog-log-slower-than', 'slowlog-max-len', 'stop-writes-on-bgsave-error', 'stream-node-max-bytes', 'stream-node-max-entries', 'tcp-backlog', 'tcp-keepalive', 'timeout', 'tracking-table-max-keys', 'zset-max-listpack-entries', 'zset-max-listpack-value'])",messageExpression="'config key ' + self.filter(k, !(k in ['replicaof', 'slaveof', 'port', 'tls-port', 'bind', 'dir', 'dbfilename', 'requirepass', 'masterauth', 'masteruser', 'daemonize', 'supervised', 'pidfile', 'logfile', 'unixsocket', 'unixsocketperm', 'include', 'protected-mode', 'rename-command', 'aclfile', 'cluster-enabled', 'cluster-config-file', 'appenddirname', 'replica-announce-ip', 'slave-announce-ip'] || k in ['active-defrag-cycle-max', 'active-defrag-cycle-min', 'active-defrag-ignore-bytes', 'active-defrag-max-scan-fields', 'active-defrag-threshold-lower', 'active-defrag-threshold-upper', 'activedefrag', 'activerehashing', 'aof-load-truncated', 'aof-rewrite-incremental-fsync', 'aof-timestamp-enabled', 'aof-use-rdb-preamble', 'appendfilename', 'appendfsync', 'appendonly', 'auto-aof-rewrite-min-size', 'auto-aof-rewrite-percentage', 'busy-reply-threshold', 'client-output-buffer-limit', 'client-query-buffer-limit', 'databases', 'dynamic-hz', 'hash-max-listpack-entries', 'hash-max-listpack-value', 'hll-sparse-max-bytes', 'hz', 'io-threads', 'io-threads-do-reads', 'jemalloc-bg-thread', 'latency-monitor-threshold', 'latency-tracking', 'lazyfree-lazy-eviction', 'lazyfree-lazy-expire', 'lazyfree-lazy-server-del', 'lazyfree-lazy-user-del', 'lazyfree-lazy-user-flush', 'lfu-decay-time', 'lfu-log-factor', 'list-compress-depth', 'list-max-listpack-size', 'loglevel', 'lua-time-limit', 'maxclients', 'maxmemory', 'maxmemory-clients', 'maxmemory-eviction-tenacity', 'maxmemory-policy', 'maxmemory-samples', 'min-replicas-max-lag', 'min-replicas-to-write', 'no-appendfsync-on-rewrite', 'notify-keyspace-events', 'proto-max-bulk-len', 'rdb-save-incremental-fsync', 'rdbchecksum', 'rdbcompression', 'repl-backlog-size', 'repl-backlog-ttl', 'repl-disable-tcp-nodelay', 'repl-diskless-load', 'repl-diskless-sync', 'repl-diskless-sync-delay', 'repl-diskless-sync-max-replicas', 'repl-ping-replica-period', 'repl-timeout', 'replica-lazy-flush', 'replica-priority', 'replica-read-only', 'replica-serve-stale-data', 'save', 'set-max-intset-entries', 'slowlog-log-slower-than', 'slowlog-max-len', 'stop-writes-on-bgsave-error', 'stream-node-max-bytes', 'stream-node-max-entries', 'tcp-backlog', 'tcp-keepalive', 'timeout', 'tracking-table-max-keys', 'zset-max-listpack-entries', 'zset-max-listpack-value']))[0] + ' is not a Redis parameter cacheops supports; docs/api.md lists the supported ones'"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !self[k].contains('\\n') && !self[k].contains('\\r'))",message="config values must be a single line"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) > 0)",messageExpression="'config ' + self.filter(k, size(self[k]) == 0)[0] + ' has an empty value; write two double quotes for an empty string, as in redis.conf'"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['active-defrag-ignore-bytes', 'auto-aof-rewrite-min-size', 'client-query-buffer-limit', 'maxmemory', 'proto-max-bulk-len', 'repl-backlog-size', 'stream-node-max-bytes']) || self[k].matches('^[0-9]{1,15}([kKmMgG][bB]?|[bB])?$'))",messageExpression="'config ' + self.filter(k, k in ['active-defrag-ignore-bytes', 'auto-aof-rewrite-min-size', 'client-query-buffer-limit', 'maxmemory', 'proto-max-bulk-len', 'repl-backlog-size', 'stream-node-max-bytes'] && !self[k].matches('^[0-9]{1,15}([kKmMgG][bB]?|[bB])?$'))[0] + ' must be a memory size: a whole number with an optional unit b, k, kb, m, mb, g or gb, such as 256mb'"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['activedefrag', 'activerehashing', 'aof-load-truncated', 'aof-rewrite-incremental-fsync', 'aof-timestamp-enabled', 'aof-use-rdb-preamble', 'appendonly', 'dynamic-hz', 'io-threads-do-reads', 'jemalloc-bg-thread', 'latency-tracking', 'lazyfree-lazy-eviction', 'lazyfree-lazy-expire', 'lazyfree-lazy-server-del', 'lazyfree-lazy-user-del', 'lazyfree-lazy-user-flush', 'no-appendfsync-on-rewrite', 'rdb-save-incremental-fsync', 'rdbchecksum', 'rdbcompression', 'repl-disable-tcp-nodelay', 'repl-diskless-sync', 'replica-lazy-flush', 'replica-read-only', 'replica-serve-stale-data', 'stop-writes-on-bgsave-error']) || self[k] in ['yes', 'no'])",messageExpression="'config ' + self.filter(k, k in ['activedefrag', 'activerehashing', 'aof-load-truncated', 'aof-rewrite-incremental-fsync', 'aof-timestamp-enabled', 'aof-use-rdb-preamble', 'appendonly', 'dynamic-hz', 'io-threads-do-reads', 'jemalloc-bg-thread', 'latency-tracking', 'lazyfree-lazy-eviction', 'lazyfree-lazy-expire', 'lazyfree-lazy-server-del', 'lazyfree-lazy-user-del', 'lazyfree-lazy-user-flush', 'no-appendfsync-on-rewrite', 'rdb-save-incremental-fsync', 'rdbchecksum', 'rdbcompression', 'repl-disable-tcp-nodelay', 'repl-diskless-sync', 'replica-lazy-flush', 'replica-read-only', 'replica-serve-stale-data', 'stop-writes-on-bgsave-error'] && !(self[k] in ['yes', 'no']))[0] + ' must be yes or no'"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['auto-aof-rewrite-percentage', 'busy-reply-threshold', 'hash-max-listpack-entries', 'hash-max-listpack-value', 'hll-sparse-max-bytes', 'latency-monitor-threshold', 'lfu-decay-time', 'lfu-log-factor', 'list-compress-depth', 'lua-time-limit', 'min-replicas-max-lag', 'min-replicas-to-write', 'repl-backlog-ttl', 'repl-diskless-sync-delay', 'repl-diskless-sync-max-replicas', 'replica-priority', 'set-max-intset-entries', 'slowlog-max-len', 'stream-node-max-entries', 'tcp-backlog', 'tcp-keepalive', 'timeout', 'tracking-table-max-keys', 'zset-max-listpack-entries', 'zset-max-listpack-value']) || (self[k].matches('^[0-9]{1,10}$') && int(self[k]) <= 2147483647))",messageExpression="'config ' + self.filter(k, k in ['auto-aof-rewrite-percentage', 'busy-reply-threshold', 'hash-max-listpack-entries', 'hash-max-listpack-value', 'hll-sparse-max-bytes', 'latency-monitor-threshold', 'lfu-decay-time', 'lfu-log-factor', 'list-compress-depth', 'lua-time-limit', 'min-replicas-max-lag', 'min-replicas-to-write', 'repl-backlog-ttl', 'repl-diskless-sync-delay', 'repl-diskless-sync-max-replicas', 'replica-priority', 'set-max-intset-entries', 'slowlog-max-len', 'stream-node-max-entries', 'tcp-backlog', 'tcp-keepalive', 'timeout', 'tracking-table-max-keys', 'zset-max-listpack-entries', 'zset-max-listpack-value'] && !(self[k].matches('^[0-9]{1,10}$') && int(self[k]) <= 2147483647))[0] + ' must be a whole number from 0 to 2147483647'"
	// +kubebuilder:validation:XValidation:rule="!('active-defrag-cycle-max' in self) || (self['active-defrag-cycle-max'].matches('^-?[0-9]{1,10}$') && int(self['active-defrag-cycle-max']) >= 1 && int(self['active-defrag-cycle-max']) <= 99)",message="config active-defrag-cycle-max must be a whole number from 1 to 99"
	// +kubebuilder:validation:XValidation:rule="!('active-defrag-cycle-min' in self) || (self['active-defrag-cycle-min'].matches('^-?[0-9]{1,10}$') && int(self['active-defrag-cycle-min']) >= 1 && int(self['active-defrag-cycle-min']) <= 99)",message="config active-defrag-cycle-min must be a whole number from 1 to 99"
	// +kubebuilder:validation:XValidation:rule="!('active-defrag-max-scan-fields' in self) || (self['active-defrag-max-scan-fields'].matches('^-?[0-9]{1,10}$') && int(self['active-defrag-max-scan-fields']) >= 1 && int(self['active-defrag-max-scan-fields']) <= 2147483647)",message="config active-defrag-max-scan-fields must be a whole number from 1 to 2147483647"
	// +kubebuilder:validation:XValidation:rule="!('active-defrag-threshold-lower' in self) || (self['active-defrag-threshold-lower'].matches('^-?[0-9]{1,10}$') && int(self['active-defrag-threshold-lower']) >= 0 && int(self['active-defrag-threshold-lower']) <= 1000)",message="config active-defrag-threshold-lower must be a whole number from 0 to 1000"
	// +kubebuilder:validation:XValidation:rule="!('active-defrag-threshold-upper' in self) || (self['active-defrag-threshold-upper'].matches('^-?[0-9]{1,10}$') && int(self['active-defrag-threshold-upper']) >= 0 && int(self['active-defrag-threshold-upper']) <= 1000)",message="config active-defrag-threshold-upper must be a whole number from 0 to 1000"
	// +kubebuilder:validation:XValidation:rule="!('databases' in self) || (self['databases'].matches('^-?[0-9]{1,10}$') && int(self['databases']) >= 1 && int(self['databases']) <= 2147483647)",message="config databases must be a whole number from 1 to 2147483647"
	// +kubebuilder:validation:XValidation:rule="!('hz' in self) || (self['hz'].matches('^-?[0-9]{1,10}$') && int(self['hz']) >= 1 && int(self['hz']) <= 500)",message="config hz must be a whole number from 1 to 500"
	// +kubebuilder:validation:XValidation:rule="!('io-threads' in self) || (self['io-threads'].matches('^-?[0-9]{1,10}$') && int(self['io-threads']) >= 1 && int(self['io-threads']) <= 128)",message="config io-threads must be a whole number from 1 to 128"
	// +kubebuilder:validation:XValidation:rule="!('list-max-listpack-size' in self) || (self['list-max-listpack-size'].matches('^-?[0-9]{1,10}$') && int(self['list-max-listpack-size']) >= -5 && int(self['list-max-listpack-size']) <= 2147483647)",message="config list-max-listpack-size must be a whole number from -5 to 2147483647"
	// +kubebuilder:validation:XValidation:rule="!('maxclients' in self) || (self['maxclients'].matches('^-?[0-9]{1,10}$') && int(self['maxclients']) >= 1 && int(self['maxclients']) <= 2147483647)",message="config maxclients must be a whole number from 1 to 2147483647"
	// +kubebuilder:validation:XValidation:rule="!('maxmemory-eviction-tenacity' in self) || (self['maxmemory-eviction-tenacity'].matches('^-?[0-9]{1,10}$') && int(self['maxmemory-eviction-tenacity']) >= 0 && int(self['maxmemory-eviction-tenacity']) <= 100)",message="config maxmemory-eviction-tenacity must be a whole number from 0 to 100"
	// +kubebuilder:validation:XValidation:rule="!('maxmemory-samples' in self) || (self['maxmemory-samples'].matches('^-?[0-9]{1,10}$') && int(self['maxmemory-samples']) >= 1 && int(self['maxmemory-samples']) <= 64)",message="config maxmemory-samples must be a whole number from 1 to 64"
	// +kubebuilder:validation:XValidation:rule="!('repl-ping-replica-period' in self) || (self['repl-ping-replica-period'].matches('^-?[0-9]{1,10}$') && int(self['repl-ping-replica-period']) >= 1 && int(self['repl-ping-replica-period']) <= 2147483647)",message="config repl-ping-replica-period must be a whole number from 1 to 2147483647"
	// +kubebuilder:validation:XValidation:rule="!('repl-timeout' in self) || (self['repl-timeout'].matches('^-?[0-9]{1,10}$') && int(self['repl-timeout']) >= 1 && int(self['repl-timeout']) <= 2147483647)",message="config repl-timeout must be a whole number from 1 to 2147483647"
	// +kubebuilder:validation:XValidation:rule="!('slowlog-log-slower-than' in self) || (self['slowlog-log-slower-than'].matches('^-?[0-9]{1,10}$') && int(self['slowlog-log-slower-than']) >= -1 && int(self['slowlog-log-slower-than']) <= 2147483647)",message="config slowlog-log-slower-than must be a whole number from -1 to 2147483647"
	// +kubebuilder:validation:XValidation:rule="!('appendfsync' in self) || self['appendfsync'] in ['always', 'everysec', 'no']",message="config appendfsync must be one of: always, everysec, no"
	// +kubebuilder:validation:XValidation:rule="!('loglevel' in self) || self['loglevel'] in ['debug', 'verbose', 'notice', 'warning']",message="config loglevel must be one of: debug, verbose, notice, warning"
	// +kubebuilder:validation:XValidation:rule="!('maxmemory-policy' in self) || self['maxmemory-policy'] in ['volatile-lru', 'allkeys-lru', 'volatile-lfu', 'allkeys-lfu', 'volatile-random', 'allkeys-random', 'volatile-ttl', 'noeviction']",message="config maxmemory-policy must be one of: volatile-lru, allkeys-lru, volatile-lfu, allkeys-lfu, volatile-random, allkeys-random, volatile-ttl, noeviction"
	// +kubebuilder:validation:XValidation:rule="!('repl-diskless-load' in self) || self['repl-diskless-load'] in ['disabled', 'on-empty-db', 'swapdb']",message="config repl-diskless-load must be one of: disabled, on-empty-db, swapdb"
	// +kubebuilder:validation:XValidation:rule="!('save' in self) || self['save'].matches('^(\"\"|[0-9]{1,10} [0-9]{1,10}( [0-9]{1,10} [0-9]{1,10})*)$')",message="save must be \"\" (no snapshots) or pairs of seconds and changes, such as 3600 1 300 100"
	// +kubebuilder:validation:XValidation:rule="!('notify-keyspace-events' in self) || self['notify-keyspace-events'].matches('^(\"\"|[KEg$lshzxetmdnA]+)$')",message="notify-keyspace-events must be \"\" or letters of KEg$lshzxetmdnA, such as Ex"
	// +kubebuilder:validation:XValidation:rule="!('client-output-buffer-limit' in self) || self['client-output-buffer-limit'].matches('^(normal|replica|slave|pubsub) [0-9]{1,15}([kKmMgG][bB]?|[bB])? [0-9]{1,15}([kKmMgG][bB]?|[bB])? [0-9]{1,10}( (normal|replica|slave|pubsub) [0-9]{1,15}([kKmMgG][bB]?|[bB])? [0-9]{1,15}([kKmMgG][bB]?|[bB])? [0-9]{1,10})*$')",message="client-output-buffer-limit must be groups of class (normal, replica, pubsub), hard limit, soft limit and soft seconds, such as replica 256mb 64mb 60"
	// +kubebuilder:validation:XValidation:rule="!('maxmemory-clients' in self) || self['maxmemory-clients'].matches('^[0-9]{1,15}([kKmMgG][bB]?|[bB]|%)?$')",message="maxmemory-clients must be a memory size such as 64mb or a share of maxmemory such as 10%"
	// +kubebuilder:validation:XValidation:rule="!('appendfilename' in self) || self['appendfilename'].matches('^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$')",message="appendfilename must be a file name of letters, digits, dots, dashes and underscores"
	Config map[string]ConfigValue `json:"config,omitempty"`

	// Auth configures the password clients and replicas use.
	// +optional
	Auth AuthSpec `json:"auth,omitempty"`

	// TLS serves every connection over TLS with a certificate the operator
	// renews before it expires (docs/security.md).
	// +optional
	TLS TLSSpec `json:"tls,omitempty"`

	// Users are ACL users with their own passwords and rules, applied
	// live on every pod. Once set, the default user is off: clients
	// authenticate as one of these users, and the operator and the
	// replicas as users of their own (docs/security.md). Adding the first
	// user rolls the pods once; later changes restart nothing.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Users []UserSpec `json:"users,omitempty"`

	// Backup configures the backup target and schedule.
	// +optional
	Backup BackupSpec `json:"backup,omitempty"`

	// Restore starts a new cluster from a backup: every pod loads the dump
	// into its data directory before redis-server starts (in a sharded
	// cluster, each shard's first pod loads that shard's dump and the
	// shard's slots are the ones the backup recorded). It cannot be
	// added, changed or removed after creation.
	// +optional
	Restore *RestoreSpec `json:"restore,omitempty"`

	// HighAvailability configures health probing and automatic failover.
	// +optional
	// +kubebuilder:default={enabled: true}
	HighAvailability HighAvailabilitySpec `json:"highAvailability,omitempty"`

	// Paused stops the operator from changing anything of this cluster
	// (children, pods, Redis roles) until it is unset again.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// ConfigValue is the value of one Redis parameter, written to redis.conf as
// it is.
// +kubebuilder:validation:MaxLength=256
type ConfigValue string

// StorageSpec describes the PersistentVolumeClaim of each pod.
//
// +kubebuilder:validation:XValidation:rule="has(self.className) == has(oldSelf.className) && (!has(self.className) || self.className == oldSelf.className)",message="storage.className is immutable: create a new CacheCluster (and restore a backup) to move to another storage class"
// +kubebuilder:validation:XValidation:rule="!has(self.size) || (string(self.size).matches('^[0-9]{1,18}([.][0-9]{1,9})?([KMGTPE]i|[numkMGTPE])?$') && quantity(string(self.size)).isGreaterThan(quantity('0')))",message="storage.size must be a positive quantity such as 1Gi: a plain number with an optional suffix (Ki, Mi, Gi, Ti, ...), no exponent"
type StorageSpec struct {
	// Size of each pod's volume, e.g. 1Gi.
	// +optional
	// +kubebuilder:default="1Gi"
	Size *resource.Quantity `json:"size,omitempty"`

	// ClassName is the StorageClass of the volumes; the cluster default
	// when unset. It cannot change after creation.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClassName *string `json:"className,omitempty"`

	// RetainOnDelete keeps the PersistentVolumeClaims (and so the data)
	// when the CacheCluster is deleted or scaled down.
	// +optional
	RetainOnDelete bool `json:"retainOnDelete,omitempty"`
}

// NetworkSpec says how clients reach the cluster.
type NetworkSpec struct {
	// ServiceType of the client Services.
	// +optional
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	ServiceType corev1.ServiceType `json:"serviceType,omitempty"`

	// AllowedClients are the pods the cluster's NetworkPolicy lets connect
	// to the Redis port, read like the peers of a NetworkPolicy: a
	// podSelector alone selects pods of the cluster's namespace, a
	// namespaceSelector alone every pod of the namespaces it selects, both
	// the selected pods of the selected namespaces. Unset: every pod of the
	// cluster's namespace; an empty list is refused (to admit no client,
	// select no pod, e.g. podSelector: {matchLabels: {none: none}}). The
	// cluster's own pods and the operator are
	// always admitted; nothing else is. Only a network plugin that enforces
	// NetworkPolicy makes this a barrier (docs/security.md).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	AllowedClients []ClientSelector `json:"allowedClients,omitempty"`
}

// SpreadMode says how strictly a cluster's pods are kept apart.
type SpreadMode string

const (
	// SpreadPreferred asks the scheduler to put the pods on different
	// nodes and spread them evenly over zones, and places them anyway when
	// it cannot.
	SpreadPreferred SpreadMode = "preferred"
	// SpreadRequired never puts two pods of a cluster on one node and
	// keeps the zones at most one pod apart; a pod that cannot be placed
	// so stays Pending.
	SpreadRequired SpreadMode = "required"
)

// SchedulingSpec says how the pods are spread over nodes and zones.
type SchedulingSpec struct {
	// Spread over nodes (kubernetes.io/hostname, pod anti-affinity) and
	// zones (topology.kubernetes.io/zone, a topology spread constraint
	// with maxSkew 1): preferred (the default) places the pods apart when
	// there is room and together otherwise; required never puts two pods
	// on one node nor lets the zones differ by more than one pod, so a
	// cluster needs as many nodes as pods, and nodes without a zone label
	// take none of its pods. A change rolls the pods one at a time.
	// +optional
	// +kubebuilder:default=preferred
	// +kubebuilder:validation:XValidation:rule="self in ['preferred', 'required']",messageExpression="'scheduling.spread ' + self + ' is not a spread mode: preferred spreads the pods over nodes and zones when there is room, required never puts two pods on one node and keeps zones at most one pod apart (pods that cannot be placed so stay Pending)'"
	Spread SpreadMode `json:"spread,omitempty"`
}

// ClientSelector selects client pods by their labels and their namespace's
// labels, as a NetworkPolicy peer does.
// +kubebuilder:validation:XValidation:rule="has(self.podSelector) || has(self.namespaceSelector)",message="an allowed client needs a podSelector, a namespaceSelector or both (an empty selector {} selects everything: namespaceSelector: {} admits every pod of every namespace)"
type ClientSelector struct {
	// PodSelector selects pods by label; in the cluster's namespace unless
	// namespaceSelector is set too.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// NamespaceSelector selects namespaces by label (every namespace has
	// kubernetes.io/metadata.name: <its name>).
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// AuthSpec configures the Redis password.
type AuthSpec struct {
	// SecretRef names a Secret in the cluster's namespace that holds the
	// password. When unset, the operator generates one in the Secret
	// <name>-auth (key "password").
	// +optional
	SecretRef *SecretKeyRef `json:"secretRef,omitempty"`
}

// SecretKeyRef names one key of a Secret in the same namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`

	// Key of the password in the Secret.
	// +optional
	// +kubebuilder:default=password
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// BackupSpec configures where backups go and when they are taken. On-demand
// backups (`kubectl cache backup NAME`) need only the target.
//
// +kubebuilder:validation:XValidation:rule="!has(self.enabled) || !self.enabled || has(self.s3) || has(self.pvc)",message="backup.enabled needs a target: set backup.s3 or backup.pvc"
// +kubebuilder:validation:XValidation:rule="!has(self.autoRestore) || !self.autoRestore || has(self.s3) || has(self.pvc)",message="backup.autoRestore restores from the backup target: set backup.s3 or backup.pvc"
// +kubebuilder:validation:XValidation:rule="!(has(self.s3) && has(self.pvc))",message="backup needs one target: set backup.s3 or backup.pvc, not both"
type BackupSpec struct {
	// Enabled turns scheduled backups on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Schedule in cron format (minute hour day-of-month month day-of-week,
	// UTC), e.g. "0 3 * * *", or a descriptor such as @daily or
	// "@every 6h".
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.split(' ').filter(f, f != '').size() == 5 || self.startsWith('@')",message="backup.schedule must be a cron expression with five fields (minute hour day month weekday) or a descriptor such as @daily"
	Schedule string `json:"schedule,omitempty"`

	// Retention says how many backups to keep. The last successful backup
	// is never removed.
	// +optional
	Retention *BackupRetention `json:"retention,omitempty"`

	// S3 is the bucket backups are written to.
	// +optional
	S3 *S3Target `json:"s3,omitempty"`

	// PVC is a PersistentVolumeClaim backups are written to, through a
	// backup-store pod (StatefulSet <name>-backup-store) that mounts it.
	// With spec.restore or autoRestore every cache pod mounts it too, read
	// only: use a ReadWriteMany claim unless all of them share a node.
	// +optional
	PVC *PVCTarget `json:"pvc,omitempty"`

	// AutoRestore rebuilds the cluster in place from its latest completed
	// backup when more than half of its pods came back without their data
	// and no pod holds any. Replication mode only: a sharded cluster
	// restores into a new CacheCluster (spec.restore). Writes made after that backup are lost (an
	// Event says from when). Off: the cluster is Failed (DataLost) and the
	// message says how to restore by hand. Turning it on adds an init
	// container to the pods, which restart once, one at a time.
	// +optional
	AutoRestore bool `json:"autoRestore,omitempty"`
}

// S3Target is a bucket (and prefix) of an S3-compatible object store.
type S3Target struct {
	// Endpoint is host[:port] of the S3 API, e.g. s3.eu-west-1.amazonaws.com.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9.-]+(:[0-9]{1,5})?$`
	Endpoint string `json:"endpoint"`

	// Bucket name.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	Bucket string `json:"bucket"`

	// Prefix of the object keys, e.g. prod/cache/. Backups of a cluster go
	// under <prefix><namespace>/<cluster>/.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.contains('..')",message="backup.s3.prefix must not start with / or contain .."
	Prefix string `json:"prefix,omitempty"`

	// Region of the bucket; us-east-1 when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Region string `json:"region,omitempty"`

	// CredentialsSecret names a Secret in the cluster's namespace with the
	// keys accessKeyID and secretAccessKey.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	CredentialsSecret string `json:"credentialsSecret"`

	// CASecret names a Secret in the cluster's namespace whose key ca.crt
	// is the certificate authority of the endpoint's TLS certificate; the
	// system roots when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	CASecret string `json:"caSecret,omitempty"`

	// Insecure talks plain HTTP instead of HTTPS. For tests and private
	// networks only: credentials and data travel unencrypted.
	// +optional
	Insecure bool `json:"insecure,omitempty"`
}

// PVCTarget is a folder on a PersistentVolumeClaim in the cluster's
// namespace.
type PVCTarget struct {
	// ClaimName of a PersistentVolumeClaim in the cluster's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ClaimName string `json:"claimName"`

	// Prefix of the file names on the claim, e.g. prod/. Backups of a
	// cluster go under <prefix><namespace>/<cluster>/.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.contains('//') && !self.split('/').exists(p, p.startsWith('.'))",message="pvc.prefix must not start with /, contain //, or have a part that starts with . (such as ..)"
	Prefix string `json:"prefix,omitempty"`
}

// RestoreSpec says which backup a new cluster starts from.
//
// +kubebuilder:validation:XValidation:rule="has(self.backup) != has(self.key)",message="restore needs exactly one of backup (a CacheBackup name) or key (an object key, with s3 or pvc)"
// +kubebuilder:validation:XValidation:rule="!has(self.key) || has(self.s3) || has(self.pvc)",message="restore.key needs restore.s3 or restore.pvc: the bucket or claim that holds it"
// +kubebuilder:validation:XValidation:rule="!(has(self.s3) && has(self.pvc))",message="restore.key is in one place: set restore.s3 or restore.pvc, not both"
type RestoreSpec struct {
	// Backup names a completed CacheBackup in this namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Backup string `json:"backup,omitempty"`

	// Key is the object key of a dump (its metadata is <key>.json next to
	// it), for a backup whose CacheBackup object is gone, e.g. after the
	// source cluster was deleted. A sharded cluster's backup is a folder:
	// its key ends in / (<prefix><namespace>/<cluster>/<backup>/), and
	// only a sharded cluster with the backup's shard count restores it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[^\x00-\x1f\x7f]+$`
	Key string `json:"key,omitempty"`

	// S3 is the bucket that holds Key.
	// +optional
	S3 *S3Target `json:"s3,omitempty"`

	// PVC is the claim that holds Key (a file name relative to the claim's
	// root). Every pod of the new cluster mounts it, read only.
	// +optional
	PVC *PVCTarget `json:"pvc,omitempty"`
}

// BackupRetention bounds the backup history.
//
// +kubebuilder:validation:XValidation:rule="has(self.count) || has(self.maxAge)",message="backup.retention needs count, maxAge or both"
type BackupRetention struct {
	// Count of backups to keep.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Count *int32 `json:"count,omitempty"`

	// MaxAge of the backups to keep: days, hours, minutes and seconds in
	// that order, each optional, e.g. 7d, 168h, 1d12h or 90m.
	// +optional
	MaxAge *Duration `json:"maxAge,omitempty"`
}

// Duration is a span of time written as days, hours, minutes and seconds in
// that order, each part optional: 7d, 36h, 1d12h, 90m, 45s. It is a string
// in Go as in the API, so an object the API server admits always decodes;
// Parse turns it into a time.Duration. The digit limits keep every admitted
// value far below what a time.Duration holds (about 292 years).
// +kubebuilder:validation:MinLength=2
// +kubebuilder:validation:MaxLength=24
// +kubebuilder:validation:Pattern=`^([0-9]{1,4}d)?([0-9]{1,6}h)?([0-9]{1,7}m)?([0-9]{1,8}s)?$`
// +kubebuilder:validation:XValidation:rule="self.matches('[1-9]')",message="a duration must be longer than zero, e.g. 7d, 168h or 90m"
type Duration string

// HighAvailabilitySpec configures health probing and automatic failover.
type HighAvailabilitySpec struct {
	// Enabled turns on replication health probing.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// ProbeTimeoutSeconds is how long the master may stay unreachable
	// before it is considered failed. The periodic probes (every quarter
	// of it, at most every 2 s) wait two periods for an answer; a master
	// that misses them for longer than this gets one last look that waits
	// this long before a failover, so a master that answers slowly but
	// within it (a loaded node) stays master. A stopped process refuses
	// that look at once; a frozen or cut-off one is failed over after
	// about twice this, and one cut off from the operator while its
	// replicas still hear from it after about four times this (it is
	// looked at again meanwhile).
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=60
	ProbeTimeoutSeconds int32 `json:"probeTimeoutSeconds,omitempty"`

	// AutoFailover promotes a replica when the master has failed. It has an
	// effect only when enabled is true.
	// +optional
	// +kubebuilder:default=true
	AutoFailover *bool `json:"autoFailover,omitempty"`
}

// NodeStatus is one Redis pod as last observed.
type NodeStatus struct {
	// PodName is the name of the pod.
	PodName string `json:"podName"`
	// Role is master or replica, as set by the day-two controller; empty
	// until it has decided.
	// +optional
	Role string `json:"role,omitempty"`
	// Address is the pod IP.
	// +optional
	Address string `json:"address,omitempty"`
	// Ready is the pod's Ready condition.
	// +optional
	Ready bool `json:"ready,omitempty"`
}

// CacheClusterStatus is what the operator observed and did. Nothing in it
// changes on every probe, so each write means something happened.
type CacheClusterStatus struct {
	// Phase is the coarse state, for `kubectl get` and dashboards.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// ObservedGeneration is the generation of the spec that the status
	// describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (summary), Reconciling and Stalled (only while
	// True), Available and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// Replicas is the number of pods that exist.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of pods that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Selector is the label selector of the pods, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`

	// CurrentVersion is the Redis version every pod runs; it changes only
	// when the last pod runs the new version.
	// +optional
	CurrentVersion string `json:"currentVersion,omitempty"`

	// Shards lists the shards of a sharded cluster as the nodes report
	// them (CLUSTER NODES): each shard's slots, master and replicas.
	// +optional
	// +listType=map
	// +listMapKey=index
	Shards []ShardStatus `json:"shards,omitempty"`

	// Nodes lists the Redis pods.
	// +optional
	// +listType=map
	// +listMapKey=podName
	Nodes []NodeStatus `json:"nodes,omitempty"`

	// CurrentMaster is the pod the day-two controller made master. Clients
	// reach it through the cluster's Service, which selects the pod labelled
	// master.
	// +optional
	CurrentMaster string `json:"currentMaster,omitempty"`

	// CurrentMasterAddress is the pod IP the current master served writes
	// at, recorded by the day-two controller once Redis reports it master
	// there: the address its replicas follow. A master whose pod comes back
	// with another IP is judged against the replicas that still follow
	// this one before it is promoted (docs/failover.md).
	// +optional
	CurrentMasterAddress string `json:"currentMasterAddress,omitempty"`

	// Operation is the day-two operation in progress, recorded before its
	// first step so that an operator restarted in the middle finishes the
	// same operation.
	// +optional
	Operation *OperationStatus `json:"operation,omitempty"`

	// Rollout holds the values the pods run, as approved by the day-two
	// controller. The day-one controller renders the StatefulSet and the
	// ConfigMap from these instead of from spec, so day-two orders a change
	// (replicas, version, configuration, resources), holds it while another
	// operation runs, and reverts it, without ever writing spec. Absent
	// until day-two first approves the spec.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// Recommendations are capacity changes day-two suggests from sustained
	// pressure. The operator never applies them: `kubectl cache recommend`
	// turns them into a commit on a new branch of the manifests' git
	// repository, for a pull request.
	// +optional
	// +listType=map
	// +listMapKey=field
	Recommendations []Recommendation `json:"recommendations,omitempty"`

	// Backup records the schedule's progress.
	// +optional
	Backup *BackupStatus `json:"backup,omitempty"`

	// TLS is the server certificate with spec.tls: its expiry and
	// renewal time, changed only when it is issued or renewed.
	// +optional
	TLS *TLSStatus `json:"tls,omitempty"`

	// Users are spec.users as last applied on every pod, with the hash
	// prefixes of their passwords and, during a rotation, of the previous
	// one and until when it is accepted.
	// +optional
	// +listType=map
	// +listMapKey=name
	Users []UserStatus `json:"users,omitempty"`

	// RestoreFrom is the dump spec.restore resolved to, recorded once when
	// the cluster is created so its pods always restore the same file.
	// +optional
	RestoreFrom *BackupLocation `json:"restoreFrom,omitempty"`
}

// BackupStatus records the schedule's progress.
type BackupStatus struct {
	// LastScheduleTime is when the schedule last created a CacheBackup.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// LastSuccessfulBackup names the newest completed CacheBackup.
	// +optional
	LastSuccessfulBackup string `json:"lastSuccessfulBackup,omitempty"`
	// LastSuccessfulTime is when it completed.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
}

// Recommendation is one suggested spec change and its evidence.
type Recommendation struct {
	// Field is the spec field to change, e.g. spec.config.maxmemory.
	Field string `json:"field"`
	// Current is its value now.
	Current string `json:"current"`
	// Recommended is the suggested value.
	Recommended string `json:"recommended"`
	// Reason is the evidence, for people and the commit message.
	Reason string `json:"reason"`
	// Since is when the pressure began.
	Since metav1.Time `json:"since"`
}

// RolloutValues are the spec fields that decide which pods exist and what
// they run.
type RolloutValues struct {
	// Replicas is the StatefulSet's pod count.
	Replicas int32 `json:"replicas"`
	// Engine is the server (redis when empty).
	// +optional
	Engine Engine `json:"engine,omitempty"`
	// Version is the engine version.
	Version string `json:"version"`
	// Image overrides the image derived from Version.
	// +optional
	Image string `json:"image,omitempty"`
	// Config holds the Redis parameters.
	// +optional
	Config map[string]ConfigValue `json:"config,omitempty"`
	// Resources of the Redis container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// RolloutStatus is what the pods run and, when the last change could not
// be rolled out, why.
type RolloutStatus struct {
	RolloutValues `json:",inline"`
	// Blocked is a change that failed its pre-check or was rolled back. It
	// is not tried again until spec changes; the Stalled condition carries
	// its message.
	// +optional
	Blocked *RolloutBlock `json:"blocked,omitempty"`
}

// RolloutBlock records a refused change.
type RolloutBlock struct {
	// Target identifies the refused pod template (a hash of the values
	// that restart pods).
	Target string `json:"target"`
	// Reason is CamelCase: UpgradePrecheckFailed or UpgradeRolledBack.
	Reason string `json:"reason"`
	// Message says what failed and what to change.
	Message string `json:"message"`
}

// OperationType names a day-two operation.
// +kubebuilder:validation:Enum=Failover;Switchover;Scaling;Upgrade;Reconfigure;Backup;Restore
type OperationType string

const (
	// OperationFailover replaces a failed master with its best replica.
	OperationFailover OperationType = "Failover"
	// OperationSwitchover moves the master role to another pod while the
	// master is healthy, without losing acknowledged writes.
	OperationSwitchover OperationType = "Switchover"
	// OperationScaling changes the number of pods.
	OperationScaling OperationType = "Scaling"
	// OperationUpgrade restarts the pods on a new pod template (version,
	// restart-only configuration, resources): replicas first from the
	// highest ordinal, then a switchover, the old master last.
	OperationUpgrade OperationType = "Upgrade"
	// OperationReconfigure applies parameters Redis can change live with
	// CONFIG SET on every pod.
	OperationReconfigure OperationType = "Reconfigure"
	// OperationBackup streams a dump of an in-sync replica to the backup
	// target. It has the lowest priority: it waits for every other
	// operation, and a failover aborts it (it is retried afterwards).
	OperationBackup OperationType = "Backup"
	// OperationRestore rebuilds a cluster that lost its data from its latest
	// completed backup (spec.backup.autoRestore): no client traffic, every
	// pod recreated and loaded from the dump, the master checked against
	// the backup's metadata, then traffic again.
	OperationRestore OperationType = "Restore"
)

// Steps of an upgrade, in order.
const (
	StepPrecheck   = "Precheck"
	StepRestart    = "Restart"
	StepSwitchover = "Switchover"
	StepRollback   = "Rollback"
)

// Steps of a restore: the pods are recreated, then the restored master is
// checked against the backup's metadata.
const (
	StepRecreate = "Recreate"
	StepVerified = "Verified"
)

// OperationStatus is one day-two operation in progress.
type OperationStatus struct {
	// ID identifies the operation in logs and Events.
	ID string `json:"id"`
	// Type of the operation.
	Type OperationType `json:"type"`
	// FromPod is the master being replaced.
	// +optional
	FromPod string `json:"fromPod,omitempty"`
	// ToPod is the pod that becomes master.
	// +optional
	ToPod string `json:"toPod,omitempty"`
	// Reason says why the operation started.
	// +optional
	Reason string `json:"reason,omitempty"`
	// StartedAt is when the operation was recorded.
	StartedAt metav1.Time `json:"startedAt"`
	// Step is the current step of a multi-step operation.
	// +optional
	Step string `json:"step,omitempty"`
	// StepStartedAt is when Step began; deadlines are measured from it.
	// +optional
	StepStartedAt *metav1.Time `json:"stepStartedAt,omitempty"`
	// Target is what the operation rolls out (Scaling, Upgrade,
	// Reconfigure).
	// +optional
	Target *RolloutValues `json:"target,omitempty"`
	// Previous is what the pods ran before, for a rollback.
	// +optional
	Previous *RolloutValues `json:"previous,omitempty"`
	// RestartAll restarts every pod created before the operation started,
	// even when its template did not change (a live parameter was removed
	// from spec and only a restart resets it).
	// +optional
	RestartAll bool `json:"restartAll,omitempty"`
	// Backup is the CacheBackup a Backup operation takes.
	// +optional
	Backup string `json:"backup,omitempty"`
	// Resharding is the slot moves of a Scaling operation of a sharded
	// cluster, as planned when it started. What has moved is read from
	// the nodes on every reconcile, never from here.
	// +optional
	Resharding *ReshardingPlan `json:"resharding,omitempty"`
}

// CacheCluster is a Redis-compatible cache: one master, its replicas, and
// everything needed to keep them healthy.
//
// The name is part of every object the cluster renders: Services must be
// DNS-1035 labels, the StatefulSet's pods carry "<name>-<revision hash>" in
// a label of at most 63 characters, and the backup-store StatefulSet adds
// "-backup-store" to that. Names ending in a suffix the chart appends are
// refused, so two clusters never render the same object (docs/api.md).
//
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must start with a letter and hold only lower-case letters, digits and '-': it names the cluster's Services, which must be DNS-1035 labels"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="metadata.name must be at most 52 characters: the StatefulSet's pods carry the name and an 11-character revision hash in a label limited to 63 characters"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 39 || !((has(self.spec.backup) && has(self.spec.backup.pvc)) || (has(self.spec.restore) && has(self.spec.restore.pvc)))",message="metadata.name must be at most 39 characters with a claim target (backup.pvc or restore.pvc): the backup-store StatefulSet <name>-backup-store carries its name and an 11-character revision hash in a label limited to 63 characters"
// +kubebuilder:validation:XValidation:rule="!['-read', '-headless', '-config', '-restore', '-auth', '-backup-store', '-precheck'].exists(s, self.metadata.name.endsWith(s))",message="metadata.name must not end in -read, -headless, -config, -restore, -auth, -backup-store or -precheck: the operator appends these to cluster names, so such a name would collide with another cluster's objects"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=cc,categories=cacheops
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`,priority=1
// +kubebuilder:printcolumn:name="Shards",type=integer,JSONPath=`.spec.shards`,description="Masters of a sharded cluster"
// +kubebuilder:printcolumn:name="Pods",type=string,JSONPath=`.status.readyReplicas`,description="Ready pods"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.currentVersion`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CacheCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec CacheClusterSpec `json:"spec"`
	// +optional
	Status CacheClusterStatus `json:"status,omitempty"`

	// DecodeError is set, in memory only, when the stored object did not
	// decode into these types: the object then holds only its metadata.
	// Controllers report it and change nothing else (see decode.go).
	DecodeError string `json:"-"`
}

// CacheClusterList is a list of CacheClusters.
//
// +kubebuilder:object:root=true
type CacheClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CacheCluster `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &CacheCluster{}, &CacheClusterList{})
}

// DesiredReplicas is the number of pods: spec.replicas with its default
// applied, for objects that did not pass through the API server (files read
// by the CLI, unit tests); for a sharded cluster shards × (1 +
// replicasPerShard).
func (c *CacheCluster) DesiredReplicas() int32 {
	if c.IsSharded() {
		return c.ShardCount() * c.PodsPerShard()
	}
	if c.Spec.Replicas == nil {
		return 3
	}
	return *c.Spec.Replicas
}
