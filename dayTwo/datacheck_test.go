package daytwo

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/cacheops/cacheops/dayTwo/access"
	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
)

// server starts a real redis-server on ip:6379 in a temporary folder.
func server(t *testing.T, ip, pw string, args ...string) *redis.Client {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is needed (hack/install-deps.sh installs it): %v", err)
	}
	cmd := exec.Command(bin, append([]string{"--bind", ip, "--bind-source-addr", ip, "--port", "6379", "--dir", t.TempDir(), "--save", "",
		"--requirepass", pw, "--masterauth", pw, "--repl-diskless-sync-delay", "0"}, args...)...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	rc := redis.NewClient(&redis.Options{Addr: ip + ":6379", Password: pw})
	t.Cleanup(func() { rc.Close() })
	for i := 0; rc.Ping(context.Background()).Err() != nil; i++ {
		if i > 100 {
			t.Fatalf("redis-server on %s does not answer", ip)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return rc
}

// The data check on real servers: a replica that holds the master's data
// passes; one that lost keys the master holds (deleted on a writable
// replica here) fails with those keys named; an empty master passes with
// nothing sampled.
func TestCheckDataOnRealServers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const pw = "pw"
	masterIP, replicaIP := "127.0.211.1", "127.0.211.2"
	m := server(t, masterIP, pw)
	rep := server(t, replicaIP, pw, "--replica-read-only", "no")

	empty := checkData(ctx, masterIP, masterIP, access.Config{Password: pw}, 8, time.Second)
	g.Expect(empty.Err).To(BeEmpty())
	g.Expect(empty.Sampled).To(Equal(0))

	for i := range 10 {
		g.Expect(m.Set(ctx, fmt.Sprintf("k%d", i), "v", 0).Err()).To(Succeed())
	}
	g.Expect(rep.Do(ctx, "REPLICAOF", masterIP, "6379").Err()).To(Succeed())
	g.Eventually(func() int64 { return rep.DBSize(ctx).Val() }, 10*time.Second, 50*time.Millisecond).Should(Equal(int64(10)))

	ok := checkData(ctx, masterIP, replicaIP, access.Config{Password: pw}, 32, 5*time.Second)
	g.Expect(ok.Err).To(BeEmpty())
	g.Expect(ok.Sampled).To(BeNumerically("~", 10, 3), "32 RANDOMKEY calls over 10 keys, repeats counted once")
	g.Expect(ok.Missing).To(BeEmpty())

	// Keys the replica lost while the master keeps them (half of them: 32
	// draws miss all five with a chance of 2^-32).
	g.Expect(rep.Del(ctx, "k0", "k1", "k2", "k3", "k4").Err()).To(Succeed())
	bad := checkData(ctx, masterIP, replicaIP, access.Config{Password: pw}, 32, 5*time.Second)
	g.Expect(bad.Err).To(BeEmpty())
	g.Expect(bad.Missing).NotTo(BeEmpty())
	for _, k := range bad.Missing {
		g.Expect(k).To(BeElementOf("k0", "k1", "k2", "k3", "k4"))
	}
	g.Expect(bad.Dropped).To(Equal(0))

	// A replica that cannot reach the master's offset: no verdict, an error.
	g.Expect(rep.Do(ctx, "REPLICAOF", "NO", "ONE").Err()).To(Succeed())
	g.Expect(m.Set(ctx, "later", "v", 0).Err()).To(Succeed())
	late := checkData(ctx, masterIP, replicaIP, access.Config{Password: pw}, 32, 300*time.Millisecond)
	g.Expect(late.Err).To(ContainSubstring("the replica"))
}

// The data check within a shard of a sharded cluster, on real nodes in
// cluster mode (one master serving every slot, one replica): the replica
// holds the master's keys, and only a READONLY connection reads them; on
// a plain one it answers MOVED, and the check could never be made.
func TestCheckShardDataOnRealServers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const pw = "pw"
	masterIP, replicaIP := "127.0.211.3", "127.0.211.4"
	cluster := func(ip string) []string {
		return []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-announce-ip", ip, "--cluster-node-timeout", "1000"}
	}
	m := server(t, masterIP, pw, cluster(masterIP)...)
	rep := server(t, replicaIP, pw, cluster(replicaIP)...)
	g.Expect(m.ClusterAddSlotsRange(ctx, 0, 16383).Err()).To(Succeed())
	g.Expect(m.ClusterMeet(ctx, replicaIP, "6379").Err()).To(Succeed())
	masterID, err := m.ClusterMyID(ctx).Result()
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error { return rep.ClusterReplicate(ctx, masterID).Err() }, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	g.Eventually(func() string { return m.ClusterInfo(ctx).Val() }, 10*time.Second, 50*time.Millisecond).Should(ContainSubstring("cluster_state:ok"))
	for i := range 10 {
		g.Expect(m.Set(ctx, fmt.Sprintf("k%d", i), "v", 0).Err()).To(Succeed())
	}
	g.Eventually(func() int64 { return rep.DBSize(ctx).Val() }, 10*time.Second, 50*time.Millisecond).Should(Equal(int64(10)))

	ok := checkShardData(ctx, masterIP, replicaIP, access.Config{Password: pw}, 32, 5*time.Second)
	g.Expect(ok.Err).To(BeEmpty())
	g.Expect(ok.Sampled).To(BeNumerically(">", 0))
	g.Expect(ok.Missing).To(BeEmpty())

	plain := checkData(ctx, masterIP, replicaIP, access.Config{Password: pw}, 32, 5*time.Second)
	g.Expect(plain.Err).To(ContainSubstring("MOVED"), "a cluster replica read without READONLY")
}
