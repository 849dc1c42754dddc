//go:build e2e

package benchmarks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cacheops/cacheops/dayTwo/plan"
)

// Throwaway: the old and the new migrate loop alternately on the same
// cluster, 256 slots each, shard 0 → shard 1.
func BenchmarkLoopExperiment(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	conf := filepath.Join(dir, "redis.conf")
	rendered := renderedConf(b)
	_ = os.WriteFile(conf, []byte(strings.Replace(rendered, "\ndir /data\n", "\n", 1)), 0o644)
	password := randomPassword(b)
	nodes := make([]*cliNode, 6)
	for i := range nodes {
		d := filepath.Join(dir, fmt.Sprintf("node-%d", i))
		_ = os.MkdirAll(d, 0o755)
		nd := &cliNode{port: freePort(b), bus: freePort(b)}
		nd.addr = fmt.Sprintf("127.0.0.1:%d", nd.port)
		startProcess(b, d, "redis", conf, "--port", strconv.Itoa(nd.port), "--cluster-port", strconv.Itoa(nd.bus),
			"--bind", "127.0.0.1", "--dir", d, "--cluster-config-file", filepath.Join(d, "nodes.conf"),
			"--requirepass", password, "--masterauth", password, "--cluster-announce-ip", "127.0.0.1")
		nd.c = redis.NewClient(&redis.Options{Addr: nd.addr, Password: password, ReadTimeout: 30 * time.Second})
		nodes[i] = nd
	}
	for _, nd := range nodes {
		eventually(b, 10*time.Second, "up", func() bool { return nd.c.Ping(ctx).Err() == nil })
	}
	formEven(b, nodes, 3)
	preload(b, []string{nodes[0].addr, nodes[2].addr, nodes[4].addr}, password, 1000000)
	src, tgt := nodes[0], nodes[2]
	sid, tid := nodeID(b, src), nodeID(b, tgt)
	c := redis.NewClient(&redis.Options{Addr: src.addr, Password: password, ReadTimeout: 60 * time.Second, PoolSize: 1})
	next := plan.EvenSlots(0, 3).End // move slots from the top of shard 0 downwards
	move := func(style string, n int) {
		var slots []int
		for range n {
			slots = append(slots, next)
			next--
		}
		for _, s := range slots {
			tgt.c.Do(ctx, "CLUSTER", "SETSLOT", s, "IMPORTING", sid)
			src.c.Do(ctx, "CLUSTER", "SETSLOT", s, "MIGRATING", tid)
		}
		start, moved := time.Now(), 0
		mig := func(keys []string) []any {
			args := []any{"MIGRATE", "127.0.0.1", strconv.Itoa(tgt.port), "", 0, 5000, "AUTH", password, "KEYS"}
			for _, k := range keys {
				args = append(args, k)
			}
			return args
		}
		switch style {
		case "old":
			for _, s := range slots {
				for {
					keys := c.ClusterGetKeysInSlot(ctx, s, 100).Val()
					if len(keys) == 0 {
						break
					}
					if err := c.Do(ctx, mig(keys)...).Err(); err != nil {
						b.Fatal(err)
					}
					c.Do(ctx, "WAIT", 1, 500)
					moved += len(keys)
				}
			}
		case "new":
			for i := 0; i < len(slots); i += 16 {
				round := slots[i:min(i+16, len(slots))]
				gets := make([]*redis.StringSliceCmd, len(round))
				c.Pipelined(ctx, func(p redis.Pipeliner) error {
					for j, s := range round {
						gets[j] = p.ClusterGetKeysInSlot(ctx, s, 100)
					}
					return nil
				})
				if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
					for _, g := range gets {
						if len(g.Val()) > 0 {
							p.Do(ctx, mig(g.Val())...)
							p.Do(ctx, "WAIT", 1, 500)
							moved += len(g.Val())
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
		}
		took := time.Since(start)
		for _, s := range slots {
			for _, nd := range nodes {
				nd.c.Do(ctx, "CLUSTER", "SETSLOT", s, "NODE", tid)
			}
		}
		b.Logf("%s: %d keys of %d slots in %s: %.0f keys/s", style, moved, n, took.Round(time.Millisecond), float64(moved)/took.Seconds())
	}
	for range 4 {
		move("old", 256)
		move("new", 256)
	}
}
