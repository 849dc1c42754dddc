package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CacheBackupSpec says which cluster to back up. The target is the
// cluster's spec.backup.s3.
type CacheBackupSpec struct {
	// Cluster is the CacheCluster in this namespace to back up.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cluster is immutable: create another CacheBackup"
	Cluster string `json:"cluster"`
}

// BackupPhase is where a backup is in its life.
// +kubebuilder:validation:Enum=Pending;Running;Completed;Failed
type BackupPhase string

const (
	// BackupPending: waiting for its turn (one operation at a time per
	// cluster), or to be retried after an abort.
	BackupPending BackupPhase = "Pending"
	// BackupRunning: the dump is being streamed to the target.
	BackupRunning BackupPhase = "Running"
	// BackupCompleted: the dump and its metadata are stored.
	BackupCompleted BackupPhase = "Completed"
	// BackupFailed: it could not be taken; Message says why.
	BackupFailed BackupPhase = "Failed"
)

// BackupLocation is where a dump is stored: the bucket (with the Secrets to
// reach it) or the claim, and the key.
type BackupLocation struct {
	// S3 is the bucket that holds the dump.
	// +optional
	S3 *S3Target `json:"s3,omitempty"`
	// PVC is the claim that holds the dump.
	// +optional
	PVC *PVCTarget `json:"pvc,omitempty"`
	// Key of the dump; its metadata is Key + ".json". A sharded
	// cluster's backup is a folder: Key ends in / and holds one dump per
	// shard (shard-<i>.rdb) and manifest.json.
	Key string `json:"key"`
}

// String names the dump for people: s3://bucket/key or pvc://claim/key.
func (l BackupLocation) String() string {
	switch {
	case l.S3 != nil:
		return "s3://" + l.S3.Bucket + "/" + l.Key
	case l.PVC != nil:
		return "pvc://" + l.PVC.ClaimName + "/" + l.Key
	}
	return l.Key
}

// CacheBackupStatus is the backup's record.
type CacheBackupStatus struct {
	// Phase of the backup.
	// +optional
	Phase BackupPhase `json:"phase,omitempty"`
	// Message says what is happening or what went wrong.
	// +optional
	Message string `json:"message,omitempty"`
	// Attempts counts the starts; a backup aborted by a failover or by an
	// operator restart is started again, up to five times.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// SourcePod is the pod the dump was taken from (or is being taken
	// from, while Running).
	// +optional
	SourcePod string `json:"sourcePod,omitempty"`
	// SourceReason says why SourcePod was chosen: e.g. the in-sync
	// replica with the most data and no background save or AOF rewrite in
	// progress, or the only pod.
	// +optional
	SourceReason string `json:"sourceReason,omitempty"`
	// BytesReceived of the dump by the current (or last) attempt. While it
	// runs it is written at most every 30 seconds (each status write wakes
	// GitOps tools), and at its end.
	// +optional
	BytesReceived int64 `json:"bytesReceived,omitempty"`
	// LastProgressTime is when the current (or last) attempt last made
	// progress, as of the last write: a byte of the dump received, or the
	// source writing the snapshot for it. An attempt without progress for
	// the operator's --backup-stall-timeout is aborted and retried.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`
	// StalledSources are the pods an attempt of this backup stalled on;
	// a retry prefers another in-sync replica.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	StalledSources []string `json:"stalledSources,omitempty"`
	// Location of the dump.
	// +optional
	Location *BackupLocation `json:"location,omitempty"`
	// Size of the dump in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`
	// Checksum of the dump, "sha256:<hex>".
	// +optional
	Checksum string `json:"checksum,omitempty"`
	// RedisVersion that wrote the dump.
	// +optional
	RedisVersion string `json:"redisVersion,omitempty"`
	// RDBVersion is the dump's RDB format version (10 for Redis 7.0, 11
	// for Valkey 8.0): a cluster restores it only on an engine version
	// that reads it (docs/engines.md).
	// +optional
	RDBVersion int32 `json:"rdbVersion,omitempty"`
	// ReplicationOffset of the source when the dump was made.
	// +optional
	ReplicationOffset int64 `json:"replicationOffset,omitempty"`
	// Keys in the dump's first database, and how many of them have a time
	// to live (a restore may drop those that expired meanwhile); -1 when
	// the dump's header could not be read.
	// +optional
	Keys int64 `json:"keys,omitempty"`
	// +optional
	ExpiringKeys int64 `json:"expiringKeys,omitempty"`
	// StartTime and CompletionTime of the attempt that succeeded (or of the
	// last attempt).
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Shards are the dumps of a sharded cluster's backup, one per shard,
	// all started in the same step (docs/backup.md says what that
	// guarantees: each dump is one point in time of its shard, not one
	// point in time of the whole cluster). Location.Key is then the
	// backup's folder (ending in /) holding shard-<i>.rdb, their metadata
	// and manifest.json; Size, Keys, ExpiringKeys and BytesReceived are
	// the shards' sums, Checksum is the manifest's and RDBVersion the
	// highest of the shards'. Empty for a replication cluster's backup.
	// +optional
	// +listType=map
	// +listMapKey=index
	// +kubebuilder:validation:MaxItems=64
	Shards []ShardBackup `json:"shards,omitempty"`
}

// ShardBackup is the dump of one shard of a sharded cluster's backup.
type ShardBackup struct {
	// Index of the shard: its pods are the ordinals index × (1 +
	// replicasPerShard) up to the next shard's first.
	Index int32 `json:"index"`
	// Slots are the hash slot ranges the shard's master served when the
	// backup started (CLUSTER NODES), such as "0-5461": a restore gives
	// the shard these slots.
	// +optional
	Slots []string `json:"slots,omitempty"`
	// SourcePod is the pod the shard's dump was taken from.
	// +optional
	SourcePod string `json:"sourcePod,omitempty"`
	// SourceReason says why SourcePod was chosen.
	// +optional
	SourceReason string `json:"sourceReason,omitempty"`
	// Key of the shard's dump in the backup's store; its metadata is Key +
	// ".json".
	// +optional
	Key string `json:"key,omitempty"`
	// BytesReceived of the shard's dump by the current (or last) attempt.
	// +optional
	BytesReceived int64 `json:"bytesReceived,omitempty"`
	// Size of the shard's dump in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`
	// Checksum of the shard's dump, "sha256:<hex>".
	// +optional
	Checksum string `json:"checksum,omitempty"`
	// RedisVersion that wrote the shard's dump.
	// +optional
	RedisVersion string `json:"redisVersion,omitempty"`
	// RDBVersion is the shard's dump's RDB format version.
	// +optional
	RDBVersion int32 `json:"rdbVersion,omitempty"`
	// ReplicationOffset of the source when the dump was made.
	// +optional
	ReplicationOffset int64 `json:"replicationOffset,omitempty"`
	// Keys in the shard's dump, and how many of them have a time to live;
	// -1 when the dump's header could not be read.
	// +optional
	Keys int64 `json:"keys,omitempty"`
	// +optional
	ExpiringKeys int64 `json:"expiringKeys,omitempty"`
	// StartTime is when the shard's snapshot was asked for (SYNC sent):
	// the source forks at once, or after a save it is busy with.
	// CompletionTime is when the dump was stored.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// IsSharded says whether the backup holds a sharded cluster's dumps, one
// per shard.
func (b *CacheBackup) IsSharded() bool { return len(b.Status.Shards) > 0 }

// IsShardedKey says whether a backup key names a sharded backup's folder
// (it ends in /) rather than one dump.
func IsShardedKey(key string) bool { return len(key) > 0 && key[len(key)-1] == '/' }

// CacheBackup is one backup of a CacheCluster, scheduled or on demand. It is
// owned by its cluster; `kubectl get cachebackups` is the history. Deleting
// a CacheBackup by hand leaves its stored dump in place; retention removes
// both.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cb,categories=cacheops
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Keys",type=integer,JSONPath=`.status.keys`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.size`
// +kubebuilder:printcolumn:name="Completed",type=date,JSONPath=`.status.completionTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CacheBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec CacheBackupSpec `json:"spec"`
	// +optional
	Status CacheBackupStatus `json:"status,omitempty"`

	// DecodeError is set, in memory only, when the stored object did not
	// decode into these types: the object then holds only its metadata.
	// Controllers report it and change nothing else (see decode.go).
	DecodeError string `json:"-"`
}

// CacheBackupList is a list of CacheBackups.
//
// +kubebuilder:object:root=true
type CacheBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CacheBackup `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &CacheBackup{}, &CacheBackupList{})
}
