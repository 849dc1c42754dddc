//go:build e2e

package benchmarks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// cliNode is one redis-server of the baseline.
type cliNode struct {
	addr string
	port int
	bus  int
	c    *redis.Client
}

// reshardRedisCLI is the baseline of BenchmarkReshard: plain redis-server
// processes and redis-cli --cluster.
func reshardRedisCLI(b *testing.B, n int) {
	ctx := context.Background()
	dir := b.TempDir()
	conf := filepath.Join(dir, "redis.conf")
	// dir is applied as it is read (a chdir): each process gets its own
	// on its command line instead of the pod's /data.
	rendered := renderedConf(b)
	if !strings.Contains(rendered, "\ndir /data\n") {
		b.Fatalf("the rendered redis.conf has no dir /data line:\n%s", rendered)
	}
	if err := os.WriteFile(conf, []byte(strings.Replace(rendered, "\ndir /data\n", "\n", 1)), 0o644); err != nil {
		b.Fatal(err)
	}
	password := randomPassword(b)
	// Nodes 0-5: 3 shards of a master and a replica; 6 and 7: the 4th
	// shard, added later.
	nodes := make([]*cliNode, 8)
	for i := range nodes {
		d := filepath.Join(dir, fmt.Sprintf("node-%d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		nd := &cliNode{port: freePort(b), bus: freePort(b)}
		nd.addr = fmt.Sprintf("127.0.0.1:%d", nd.port)
		// The rendered redis.conf, with what a pod gets on its command
		// line (the password, the announced address) and what differs
		// between processes on one host (ports, folder).
		startProcess(b, d, "redis", conf, "--port", strconv.Itoa(nd.port), "--cluster-port", strconv.Itoa(nd.bus),
			"--bind", "127.0.0.1", "--dir", d, "--cluster-config-file", filepath.Join(d, "nodes.conf"),
			"--requirepass", password, "--masterauth", password, "--cluster-announce-ip", "127.0.0.1")
		nd.c = redis.NewClient(&redis.Options{Addr: nd.addr, Password: password, ReadTimeout: 30 * time.Second})
		b.Cleanup(func() { _ = nd.c.Close() })
		nodes[i] = nd
	}
	for i, nd := range nodes {
		for deadline := time.Now().Add(10 * time.Second); nd.c.Ping(ctx).Err() != nil; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("node-%d", i), "redis.log"))
				b.Fatalf("redis-server %s does not answer within 10s; its log:\n%s", nd.addr, log)
			}
		}
	}
	formEven(b, nodes[:6], 3)

	masters := []string{nodes[0].addr, nodes[2].addr, nodes[4].addr}
	preload(b, masters, password, n)
	keys := make([]int64, cachev1alpha1.SlotCount)
	for i := range 3 {
		slotKeys(b, nodes[2*i].addr, password, []probe.SlotRange{plan.EvenSlots(i, 3)}, keys)
	}
	var out bytes.Buffer
	cli := func(args ...string) {
		cmd := exec.Command("redis-cli", append([]string{"-a", password, "--no-auth-warning", "--cluster"}, args...)...)
		fmt.Fprintf(&out, "$ redis-cli --cluster %s\n", strings.Join(args, " "))
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			benchLog(b, "reshard-redis-cli.log", out.Bytes())
			b.Fatalf("redis-cli --cluster %s: %v (output in bench/reshard-redis-cli.log)", strings.Join(args, " "), err)
		}
	}
	all := func() ([]string, string) {
		var addrs []string
		for _, nd := range nodes {
			addrs = append(addrs, nd.addr)
		}
		return addrs, nodes[0].addr
	}
	before := ownersOf(b, nodes[0])

	// 3 → 4: an empty master and its replica join, rebalance fills it.
	w := watchMoves(b, password, all)
	start := time.Now()
	cli("add-node", nodes[6].addr, nodes[0].addr)
	id6 := nodeID(b, nodes[6])
	waitAgreed(b, nodes[:7], 7)
	cli("add-node", nodes[7].addr, nodes[0].addr, "--cluster-slave", "--cluster-master-id", id6)
	waitAgreed(b, nodes, 8)
	// redis-cli does not wait for the new master to report
	// cluster_state:ok (Redis holds a master at fail for 2 s after it
	// starts and until it has heard of every slot's owner), and a MIGRATE
	// into it meanwhile fails with CLUSTERDOWN, which ends the rebalance.
	// cacheops waits for the same before its first move.
	waitSettled(b, nodes)
	cli("rebalance", nodes[0].addr, "--cluster-use-empty-masters")
	total := time.Since(start)
	waitSettled(b, nodes)
	move := w.end(b)
	after := ownersOf(b, nodes[0])
	slots, moved := movedBetween(before, after, keys)
	checkKeys(b, nodes, n)
	reportMove(b, "up", slots, moved, move, total)

	// 4 → 3: the 4th master gives its slots away, then both its nodes
	// leave (del-node also shuts them down).
	w = watchMoves(b, password, all)
	start = time.Now()
	cli("rebalance", nodes[0].addr, "--cluster-weight", id6+"=0")
	cli("del-node", nodes[0].addr, nodeID(b, nodes[7]))
	cli("del-node", nodes[0].addr, id6)
	total = time.Since(start)
	nodes = nodes[:6]
	waitSettled(b, nodes)
	move = w.end(b)
	final := ownersOf(b, nodes[0])
	slots, moved = movedBetween(after, final, keys)
	checkKeys(b, nodes, n)
	reportMove(b, "down", slots, moved, move, total)
	benchLog(b, "reshard-redis-cli.log", out.Bytes())
}

func randomPassword(b *testing.B) string {
	buf := make([]byte, 16)
	if _, err := rand.Read(buf); err != nil {
		b.Fatal(err)
	}
	return hex.EncodeToString(buf)
}

func eventually(b *testing.B, limit time.Duration, what string, ok func() bool) {
	for deadline := time.Now().Add(limit); ; {
		if ok() {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func nodeID(b *testing.B, nd *cliNode) string {
	id, err := nd.c.ClusterMyID(context.Background()).Result()
	if err != nil {
		b.Fatal(err)
	}
	return id
}

// formEven forms a cluster of the nodes as cacheops does: every node met,
// shard i's master (node 2i) serves EvenSlots(i, shards), node 2i+1
// replicates it; it waits for cluster_state:ok everywhere and every
// replica in sync.
func formEven(b *testing.B, nodes []*cliNode, shards int) {
	ctx := context.Background()
	for _, nd := range nodes[1:] {
		if err := nodes[0].c.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", nd.port, nd.bus).Err(); err != nil {
			b.Fatal(err)
		}
	}
	waitAgreed(b, nodes, len(nodes))
	for i := range shards {
		r := plan.EvenSlots(i, shards)
		if err := nodes[2*i].c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", r.Start, r.End).Err(); err != nil {
			b.Fatal(err)
		}
	}
	for i := range shards {
		id := nodeID(b, nodes[2*i])
		eventually(b, 30*time.Second, "the replica knows its master", func() bool {
			return nodes[2*i+1].c.ClusterReplicate(ctx, id).Err() == nil
		})
	}
	eventually(b, 60*time.Second, "every node reports cluster_state:ok and every replica is in sync", func() bool {
		for _, nd := range nodes {
			info, err := nd.c.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		for i := range shards {
			info, err := nodes[2*i+1].c.Info(ctx, "replication").Result()
			if err != nil || !strings.Contains(info, "master_link_status:up") {
				return false
			}
		}
		return true
	})
}

// waitAgreed waits until every node knows count nodes and no handshake
// runs: redis-cli refuses to rebalance a cluster whose nodes disagree.
func waitAgreed(b *testing.B, nodes []*cliNode, count int) {
	eventually(b, 30*time.Second, fmt.Sprintf("every node knows the %d nodes", count), func() bool {
		for _, nd := range nodes {
			v, err := nodeView(context.Background(), nd.c)
			if err != nil || len(v.Nodes) != count {
				return false
			}
			for _, x := range v.Nodes {
				if x.Handshake {
					return false
				}
			}
		}
		return true
	})
}

// waitSettled waits until no node marks a slot moving and every node
// reports cluster_state:ok.
func waitSettled(b *testing.B, nodes []*cliNode) {
	eventually(b, 60*time.Second, "the cluster settles", func() bool {
		for _, nd := range nodes {
			v, err := nodeView(context.Background(), nd.c)
			if err != nil || len(v.Myself.Migrating)+len(v.Myself.Importing) > 0 {
				return false
			}
			info, err := nd.c.ClusterInfo(context.Background()).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		return true
	})
}

func ownersOf(b *testing.B, nd *cliNode) []string {
	v, err := nodeView(context.Background(), nd.c)
	if err != nil {
		b.Fatal(err)
	}
	return owners(v)
}

// checkKeys: the masters hold n keys together.
func checkKeys(b *testing.B, nodes []*cliNode, n int) {
	var total int64
	for _, nd := range nodes {
		info, err := nd.c.Info(context.Background(), "replication").Result()
		if err != nil {
			b.Fatal(err)
		}
		if strings.Contains(info, "role:master") {
			total += nd.c.DBSize(context.Background()).Val()
		}
	}
	if total != int64(n) {
		b.Fatalf("the masters hold %d keys, want %d", total, n)
	}
}
