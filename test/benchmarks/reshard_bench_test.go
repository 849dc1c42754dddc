//go:build e2e

package benchmarks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
	"github.com/cacheops/cacheops/renderer"
)

// BenchmarkReshard measures resharding throughput, keys moved per second,
// on RESHARD_KEYS keys (default 1,000,000; values of 24 bytes), 3 shards
// → 4 → 3, each shard a master and one replica, the same redis.conf on
// both sides (the one the chart renders for reshardSpec):
//
//   - "baseline" is redis-cli --cluster (Debian's redis-tools) on plain
//     redis-server processes on 127.0.0.1: the cluster is formed with the
//     even layout cacheops forms, loaded; a 4th master and its replica
//     join with add-node, then `rebalance --cluster-use-empty-masters`;
//     back to 3: `rebalance --cluster-weight <4th>=0`, then del-node of
//     the replica and of the master.
//   - "cacheops" is the operator (the manager binary) on the
//     process-backed cluster: the same spec as a CacheCluster, the same
//     keys; spec.shards 3 → 4, then 4 → 3.
//
// move_s is measured alike on both sides, by polling every node's CLUSTER
// NODES every 50 ms: from the first slot marked moving to the last change
// of the slot owners or the moving markers. keys_per_s is the keys of the
// slots that changed owner, counted before the move, per move_s. total_s
// is the whole change: for cacheops from the spec patch to the operation's
// end (the new pods start, the removed ones go); for redis-cli the
// add-node, rebalance and del-node commands and the waits between them
// for every node to know the new ones and report cluster_state:ok (its
// processes run already).
// The two do not move the same slots: cacheops moves to the even layout
// (8,193 slots each way), rebalance the fewest (about 4,096); both figures
// are in the JSON (slots, keys).
func BenchmarkReshard(b *testing.B) {
	n := envInt("RESHARD_KEYS", 1_000_000)
	b.Run("baseline", func(b *testing.B) {
		b.StopTimer()
		for range b.N {
			reshardRedisCLI(b, n)
		}
	})
	b.Run("cacheops", func(b *testing.B) {
		b.StopTimer()
		for range b.N {
			reshardCacheops(b, n)
		}
	})
}

// reshardSpec is the cluster both sides run: 3 shards of a master and a
// replica, maxmemory with room for the data set and noeviction, so a
// key that does not fit fails the load instead of vanishing.
func reshardSpec() cachev1alpha1.CacheClusterSpec {
	return cachev1alpha1.CacheClusterSpec{
		Version: "7.0.15", Mode: cachev1alpha1.ModeSharded, Shards: ptr.To[int32](3), ReplicasPerShard: ptr.To[int32](1),
		Config: map[string]cachev1alpha1.ConfigValue{"maxmemory": "512mb", "maxmemory-policy": "noeviction"},
	}
}

// renderedConf is the redis.conf the chart renders for reshardSpec.
func renderedConf(b *testing.B) string {
	cc := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "bench"}, Spec: reshardSpec()}
	objs, err := renderer.Render(cc, renderer.DefaultCapabilities())
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == "rs-config" {
			conf, _, _ := unstructuredString(o.Object, "data", "redis.conf")
			return conf
		}
	}
	b.Fatal("the chart rendered no rs-config ConfigMap")
	return ""
}

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

// reshardKey and reshardValue are the data set: the same on both sides.
func reshardKey(i int) string   { return fmt.Sprintf("k:%07d", i) }
func reshardValue(i int) string { return fmt.Sprintf("%024d", i) }

// preload writes n keys through a cluster-aware client, 10,000 per
// pipeline (go-redis sends each node its part at once).
func preload(b *testing.B, addrs []string, password string, n int) {
	ctx := context.Background()
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Password: password, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	defer rc.Close()
	start := time.Now()
	const batch = 10000
	for from := 0; from < n; from += batch {
		if _, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := from; i < min(from+batch, n); i++ {
				p.Set(ctx, reshardKey(i), reshardValue(i), 0)
			}
			return nil
		}); err != nil {
			b.Fatalf("preloading: %v", err)
		}
	}
	b.Logf("preloaded %d keys in %s", n, time.Since(start).Round(time.Millisecond))
}

// slotKeys is CLUSTER COUNTKEYSINSLOT of every slot a node serves, in one
// pipeline.
func slotKeys(b *testing.B, addr, password string, slots []probe.SlotRange, into []int64) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, ReadTimeout: 30 * time.Second})
	defer c.Close()
	cmds := map[int]*redis.IntCmd{}
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, r := range slots {
			for s := r.Start; s <= r.End; s++ {
				cmds[s] = p.ClusterCountKeysInSlot(ctx, s)
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	for s, cmd := range cmds {
		into[s] = cmd.Val()
	}
}

// nodeView reads a node's CLUSTER NODES.
func nodeView(ctx context.Context, c *redis.Client) (*probe.ClusterView, error) {
	nodes, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	return probe.ParseClusterView("", nodes)
}

// owners is, for every slot, the ID of the node that serves it in a
// view ("" for none).
func owners(v *probe.ClusterView) []string {
	out := make([]string, cachev1alpha1.SlotCount)
	for _, n := range v.Nodes {
		if !n.Master {
			continue
		}
		for _, r := range n.Slots {
			for s := r.Start; s <= r.End; s++ {
				out[s] = n.ID
			}
		}
	}
	return out
}

// movedBetween counts the slots whose owner differs and the keys they
// hold (keys by slot, counted before).
func movedBetween(before, after []string, keys []int64) (slots int, moved int64) {
	for s := range before {
		if before[s] != after[s] {
			slots++
			moved += keys[s]
		}
	}
	return slots, moved
}

// moveWatch polls a cluster every 50 ms: the slot owners as one node
// (the observer) sees them, and the migrating and importing markers every
// node shows on its own line. first is the first poll that differs from
// the one before the move; last the last poll that differed from the one
// before it.
type moveWatch struct {
	password string
	// nodes returns the addresses to read markers from, and the
	// observer's.
	nodes func() (addrs []string, observer string)

	mu          sync.Mutex
	first, last time.Time
	clients     map[string]*redis.Client
	stop, done  chan struct{}
}

func watchMoves(b *testing.B, password string, nodes func() ([]string, string)) *moveWatch {
	w := &moveWatch{password: password, nodes: nodes, clients: map[string]*redis.Client{}, stop: make(chan struct{}), done: make(chan struct{})}
	initial := w.poll()
	if initial == "" {
		b.Fatal("the move watch could not read the cluster")
	}
	go func() {
		defer close(w.done)
		prev := initial
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			sig := w.poll()
			if sig == "" || sig == prev {
				continue
			}
			now := time.Now()
			w.mu.Lock()
			if w.first.IsZero() {
				w.first = now
			}
			w.last = now
			w.mu.Unlock()
			prev = sig
		}
	}()
	return w
}

// poll is the signature of one look: "" when a node did not answer.
func (w *moveWatch) poll() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	addrs, observer := w.nodes()
	var sig strings.Builder
	ov, err := nodeView(ctx, w.client(observer))
	if err != nil {
		return ""
	}
	for _, n := range ov.Nodes {
		if n.Master && len(n.Slots) > 0 {
			fmt.Fprintf(&sig, "%s=%v;", n.ID, n.Slots)
		}
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		v, err := nodeView(ctx, w.client(a))
		if err != nil {
			// A node being added or removed may not answer yet or any
			// more; its markers are read next time.
			continue
		}
		if len(v.Myself.Migrating)+len(v.Myself.Importing) > 0 {
			fmt.Fprintf(&sig, "|%s %v %v", v.Myself.ID, v.Myself.Migrating, v.Myself.Importing)
		}
	}
	return sig.String()
}

func (w *moveWatch) client(addr string) *redis.Client {
	c, ok := w.clients[addr]
	if !ok {
		c = redis.NewClient(&redis.Options{Addr: addr, Password: w.password, DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, MaxRetries: -1, PoolSize: 1})
		w.clients[addr] = c
	}
	return c
}

// end stops the watch and returns the move's duration.
func (w *moveWatch) end(b *testing.B) time.Duration {
	close(w.stop)
	<-w.done
	for _, c := range w.clients {
		_ = c.Close()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first.IsZero() {
		b.Fatal("the move watch saw no slot move")
	}
	// The first change is seen up to one poll after it happened.
	return w.last.Sub(w.first) + 50*time.Millisecond
}

// reportMove reports one direction's figures under a prefix.
func reportMove(b *testing.B, prefix string, slots int, keys int64, move, total time.Duration) {
	b.ReportMetric(float64(keys)/move.Seconds(), prefix+"_keys_per_s")
	b.ReportMetric(float64(keys), prefix+"_keys_moved")
	b.ReportMetric(float64(slots), prefix+"_slots_moved")
	b.ReportMetric(move.Seconds(), prefix+"_move_s")
	b.ReportMetric(total.Seconds(), prefix+"_total_s")
	b.Logf("%s: %d slots, %d keys moved in %s (%.0f keys/s); the whole change took %s", prefix, slots, keys,
		move.Round(time.Millisecond), float64(keys)/move.Seconds(), total.Round(time.Millisecond))
}

// benchLog keeps a file of the run under bench/ (the manager's log, the
// redis-cli output).
func benchLog(b *testing.B, name string, data []byte) {
	if err := os.MkdirAll(benchDir(), 0o755); err != nil {
		b.Log(err)
		return
	}
	if err := os.WriteFile(filepath.Join(benchDir(), name), data, 0o644); err != nil {
		b.Log(err)
	}
}
