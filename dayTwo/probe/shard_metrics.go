package probe

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The per-shard series of a sharded cluster, labelled namespace, cluster
// and shard (the index: its pods are the ordinals index × (1 +
// replicasPerShard) onwards). They are set every probe period from the
// pods' latest answers, like cacheops_redis_keys, not from the
// controller's reconciles, and they
// exist only for the shards whose pods are probed: at most spec.shards'
// maximum (64) per cluster, gone with the shard's pods or the cluster.
var (
	shardSlots = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cacheops_shard_slots",
		Help: "Hash slots the shard's master serves (its own CLUSTER NODES line), as last probed.",
	}, []string{"namespace", "cluster", "shard"})
	shardKeys = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cacheops_shard_keys",
		Help: "Keys in the shard's master, as last probed.",
	}, []string{"namespace", "cluster", "shard"})
	shardMigrating = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cacheops_shard_migrating_slots",
		Help: "Slots the shard's masters mark migrating to another shard (resharding, or a move left half done), as last probed.",
	}, []string{"namespace", "cluster", "shard"})
	shardImporting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cacheops_shard_importing_slots",
		Help: "Slots the shard's masters mark importing from another shard, as last probed.",
	}, []string{"namespace", "cluster", "shard"})
	shardStateOK = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cacheops_shard_cluster_state_ok",
		Help: "1 when every node of the shard that answered the last probe reports cluster_state:ok; 0 when one reports fail or none answered.",
	}, []string{"namespace", "cluster", "shard"})
)

func init() {
	metrics.Registry.MustRegister(shardSlots, shardKeys, shardMigrating, shardImporting, shardStateOK)
}

// ShardFigures are one shard's series from its pods' latest answers.
type ShardFigures struct {
	Shard int
	// Answered: some node of the shard answered CLUSTER NODES. Without
	// it only StateOK (0) is known; the other series keep their last
	// value.
	Answered                    bool
	Slots, Migrating, Importing int
	Keys                        int64
	StateOK                     bool
	// master is the pod the slots and keys were read from.
	master string
}

// ShardFiguresOf computes the series of every shard that has a target
// from one round's observations (by pod). The shard's master is the node
// of its pods that answers as a master and serves the most slots (a new
// shard's lead serves none yet); migrating and importing slots are
// counted over every master of the shard.
func ShardFiguresOf(targets []Target, results []Observation) []ShardFigures {
	byPod := make(map[string]Observation, len(results))
	for _, o := range results {
		byPod[o.Pod] = o
	}
	var out []ShardFigures
	index := map[int]int{}
	for _, t := range targets {
		if !t.Cluster || t.Shard < 0 {
			continue
		}
		i, ok := index[t.Shard]
		if !ok {
			i = len(out)
			index[t.Shard] = i
			out = append(out, ShardFigures{Shard: t.Shard, StateOK: true})
		}
		f := &out[i]
		o, seen := byPod[t.Pod]
		if !seen || !o.Reachable || o.Cluster == nil {
			continue
		}
		cv := o.Cluster
		f.Answered = true
		f.StateOK = f.StateOK && cv.State == "ok"
		if !cv.Myself.Master {
			continue
		}
		f.Migrating += len(cv.Myself.Migrating)
		f.Importing += len(cv.Myself.Importing)
		slots := 0
		for _, r := range cv.Myself.Slots {
			slots += r.Len()
		}
		if f.master == "" || slots > f.Slots {
			f.master, f.Slots, f.Keys = t.Pod, slots, o.Keys
		}
	}
	for i := range out {
		out[i].StateOK = out[i].StateOK && out[i].Answered
	}
	slices.SortFunc(out, func(a, b ShardFigures) int { return a.Shard - b.Shard })
	return out
}

// recordShardMetrics sets the series of one round and deletes those of
// shards that no longer have a probed pod (exported: the shards that had
// series before this round; it returns this round's).
func recordShardMetrics(key types.NamespacedName, figures []ShardFigures, exported map[int]bool) map[int]bool {
	now := make(map[int]bool, len(figures))
	for _, f := range figures {
		now[f.Shard] = true
		l := prometheus.Labels{"namespace": key.Namespace, "cluster": key.Name, "shard": strconv.Itoa(f.Shard)}
		ok := 0.0
		if f.StateOK {
			ok = 1
		}
		shardStateOK.With(l).Set(ok)
		if !f.Answered {
			continue
		}
		shardSlots.With(l).Set(float64(f.Slots))
		shardKeys.With(l).Set(float64(f.Keys))
		shardMigrating.With(l).Set(float64(f.Migrating))
		shardImporting.With(l).Set(float64(f.Importing))
	}
	for shard := range exported {
		if !now[shard] {
			deleteShard(prometheus.Labels{"namespace": key.Namespace, "cluster": key.Name, "shard": strconv.Itoa(shard)})
		}
	}
	return now
}

func deleteShard(labels prometheus.Labels) {
	for _, g := range []*prometheus.GaugeVec{shardSlots, shardKeys, shardMigrating, shardImporting, shardStateOK} {
		g.DeletePartialMatch(labels)
	}
}
