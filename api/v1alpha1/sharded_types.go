package v1alpha1

// ClusterMode is how a CacheCluster spreads its keys.
// +kubebuilder:validation:Enum=replication;sharded
// +kubebuilder:validation:MaxLength=16
type ClusterMode string

const (
	// ModeReplication is one master and its replicas, each holding every
	// key.
	ModeReplication ClusterMode = "replication"
	// ModeSharded is the Redis Cluster protocol: the hash slots spread over
	// several masters, each with its own replicas.
	ModeSharded ClusterMode = "sharded"
)

// SlotCount is the number of hash slots of a Redis Cluster.
const SlotCount = 16384

// DefaultReplicasPerShard is spec.replicasPerShard when it is unset.
const DefaultReplicasPerShard = 1

// ShardStatus is one shard of a sharded cluster, as its nodes report it.
type ShardStatus struct {
	// Index of the shard: its pods are the ordinals index × (1 +
	// replicasPerShard) up to the next shard's first.
	Index int32 `json:"index"`
	// Slots are the hash slot ranges the shard's master serves, such as
	// "0-5460"; a single slot is written alone ("5461").
	// +optional
	Slots []string `json:"slots,omitempty"`
	// Master is the pod that serves the slots; empty while no pod of the
	// shard is a master.
	// +optional
	Master string `json:"master,omitempty"`
	// Replicas are the pods that replicate the master.
	// +optional
	Replicas []string `json:"replicas,omitempty"`
	// ApproximateKeys is the number of keys the shard's master holds,
	// rounded to two significant digits. It is rewritten only when the
	// count has moved more than 10% (and more than 100 keys) away from
	// it, never on every probe: each status write makes Argo CD refresh
	// the application. `kubectl cache plan --live` estimates from it how
	// many keys a shard-count change moves. Unset while the master's count
	// is not known.
	// +optional
	ApproximateKeys *int64 `json:"approximateKeys,omitempty"`
}

// IsSharded says whether the cluster runs the Redis Cluster protocol.
func (c *CacheCluster) IsSharded() bool {
	return c.Spec.Mode == ModeSharded
}

// ShardCount is spec.shards, or 0 for a replication cluster.
func (c *CacheCluster) ShardCount() int32 {
	if !c.IsSharded() || c.Spec.Shards == nil {
		return 0
	}
	return *c.Spec.Shards
}

// ReplicasPerShard is spec.replicasPerShard with its default applied.
func (c *CacheCluster) ReplicasPerShard() int32 {
	if c.Spec.ReplicasPerShard == nil {
		return DefaultReplicasPerShard
	}
	return *c.Spec.ReplicasPerShard
}

// PodsPerShard is the number of pods of one shard: its master and its
// replicas.
func (c *CacheCluster) PodsPerShard() int32 {
	return 1 + c.ReplicasPerShard()
}

// ShardOf is the shard of the pod with the given StatefulSet ordinal: the
// pods of a shard are consecutive ordinals, the first of them meant as its
// master.
func (c *CacheCluster) ShardOf(ordinal int32) int32 {
	return ordinal / c.PodsPerShard()
}

// The ShardsReady condition of a sharded cluster, written by day-two from
// what the nodes report: True while every node that answers says
// cluster_state:ok with all 16384 slots served. Ready is False until it is.
const (
	ConditionShardsReady = "ShardsReady"
	// ReasonAllSlotsServed: every node reports cluster_state:ok and all
	// slots served.
	ReasonAllSlotsServed = "AllSlotsServed"
	// ReasonSlotsNotServed: a node reports cluster_state:fail, or slots no
	// master serves (a cluster being formed, a shard without a master).
	ReasonSlotsNotServed = "SlotsNotServed"
	// EventShardMasterChanged: another pod serves a shard's slots.
	EventShardMasterChanged = "ShardMasterChanged"
)

// ReshardingPlan is a change of a sharded cluster's shard count: the slot
// ranges that move, from which shard to which.
type ReshardingPlan struct {
	// FromShards is the number of shards serving slots when it started.
	FromShards int32 `json:"fromShards"`
	// ToShards is spec.shards.
	ToShards int32 `json:"toShards"`
	// SlotsToMove is the number of slots the moves hold.
	SlotsToMove int32 `json:"slotsToMove"`
	// Moves are the slot ranges to move, in the order they move: a
	// removed shard's slots first.
	// +optional
	// +kubebuilder:validation:MaxItems=4096
	Moves []SlotMove `json:"moves,omitempty"`
}

// SlotMove is slot ranges that move from one shard's master to another's.
type SlotMove struct {
	// From is the index of the shard giving the slots.
	From int32 `json:"from"`
	// To is the index of the shard taking them.
	To int32 `json:"to"`
	// Slots are ranges such as "4096-5461".
	Slots []string `json:"slots"`
}

// Events of resharding.
const (
	// EventSlotsMoving: a batch of slots started moving between shards.
	EventSlotsMoving = "SlotsMoving"
	// EventShardAdded: a new shard serves its slots.
	EventShardAdded = "ShardAdded"
	// EventShardRemoved: a removed shard's nodes own no slot and no key
	// and no remaining node knows them; its pods may go.
	EventShardRemoved = "ShardRemoved"
)
