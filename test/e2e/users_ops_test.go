//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// appUser is the one client user of the tests in this file: the writer's
// keys (w:*), WAIT, nothing dangerous.
var appUser = cachev1alpha1.UserSpec{Name: "app", PasswordSecret: cachev1alpha1.SecretKeyRef{Name: "app-writer"}, Rules: "~w:* +@read +@write +wait -@dangerous"}

// expectUsersEverywhere waits until, on every pod of a cluster with
// spec.users, the pod was started with the ACL file, user authenticates
// with pw, the default user (the cluster's password) is refused, every
// replica's link to the master is up, and the master sees each replica
// connected as cacheops-replication. It returns the cluster as it was
// then.
func expectUsersEverywhere(g Gomega, cc *cachev1alpha1.CacheCluster, user, pw string) *cachev1alpha1.CacheCluster {
	ctx := context.Background()
	clusterPw := password(g, cc.Namespace, cc.Name)
	var got *cachev1alpha1.CacheCluster
	g.Eventually(func(g Gomega) {
		got = getCC(g, cc)
		g.Expect(got.Status.Operation).To(BeNil(), "an operation still runs")
		g.Expect(got.Status.CurrentMaster).NotTo(BeEmpty())
		masterIP := pod(g, cc.Namespace, got.Status.CurrentMaster).Status.PodIP
		for _, n := range got.Status.Nodes {
			p := pod(g, cc.Namespace, n.PodName)
			ip := p.Status.PodIP
			g.Expect(startedWithACL(p)).To(BeTrue(), "%s runs without --aclfile", n.PodName)
			g.Expect(auth(ip, user, pw)).To(Succeed(), "user %s on %s", user, n.PodName)
			expectRefused(g, auth(ip, "default", clusterPw), "WRONGPASS", "the default user on "+n.PodName)
			if n.PodName == got.Status.CurrentMaster {
				continue
			}
			rc := operatorAt(g, got, ip)
			info, err := rc.Info(ctx, "replication").Result()
			_ = rc.Close()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(info).To(ContainSubstring("master_host:"+masterIP+"\r\n"), n.PodName)
			g.Expect(info).To(ContainSubstring("master_link_status:up\r\n"), n.PodName)
		}
		// The replicas' connections on the master: flags=S, and the user
		// they authenticated as.
		mc := operatorAt(g, got, masterIP)
		list, err := mc.ClientList(ctx).Result()
		_ = mc.Close()
		g.Expect(err).NotTo(HaveOccurred())
		var replicaUsers []string
		for _, line := range strings.Split(list, "\n") {
			fields := map[string]string{}
			for _, f := range strings.Fields(line) {
				if k, v, ok := strings.Cut(f, "="); ok {
					fields[k] = v
				}
			}
			if strings.Contains(fields["flags"], "S") {
				replicaUsers = append(replicaUsers, fields["user"])
			}
		}
		g.Expect(replicaUsers).To(HaveLen(len(got.Status.Nodes)-1), list)
		g.Expect(replicaUsers).To(HaveEach(Equal(cachev1alpha1.ReplicationUser)), list)
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	return got
}

// expectAppRules checks the rules of appUser on a cluster's master: its
// keys and WAIT work, anything else is NOPERM, and a connection that names
// no user is NOAUTH.
func expectAppRules(g Gomega, cc *cachev1alpha1.CacheCluster, pw string) {
	ctx := context.Background()
	ip := pod(g, cc.Namespace, cc.Status.CurrentMaster).Status.PodIP
	w := userAt(ip, appUser.Name, pw)
	defer w.Close()
	g.Expect(w.Set(ctx, "w:rules", "ok", 0).Err()).To(Succeed())
	g.Expect(w.Do(ctx, "WAIT", 1, 5000).Int64()).To(BeNumerically(">=", 1))
	expectRefused(g, w.Set(ctx, "other:1", "x", 0).Err(), "NOPERM", "app: a key outside ~w:*")
	expectRefused(g, w.FlushAll(ctx).Err(), "NOPERM", "app: FLUSHALL (-@dangerous)")
	expectRefused(g, w.ConfigGet(ctx, "maxmemory").Err(), "NOPERM", "app: CONFIG (-@dangerous)")
	anon := redis.NewClient(&redis.Options{Addr: ip + ":6379", MaxRetries: -1})
	defer anon.Close()
	expectRefused(g, anon.Get(ctx, "w:rules").Err(), "NOAUTH", "no user")
}

// waitNodes waits until the cluster replicates with n pods.
func waitNodes(g Gomega, cc *cachev1alpha1.CacheCluster, n int) *cachev1alpha1.CacheCluster {
	var got *cachev1alpha1.CacheCluster
	g.Eventually(func(g Gomega) {
		got = waitReplicating(g, cc)
		g.Expect(got.Status.Nodes).To(HaveLen(n))
	}, limits.ClusterReady, limits.Poll).Should(Succeed(), notReadyPods(cc.Namespace, "CacheCluster "+cc.Name+" never replicated with the new replica count"))
	return got
}

// Valkey 8.0.1 with a client user: the users are applied (default user
// refused, the user's rules enforced, the replicas linked as
// cacheops-replication); then 3 → 5 pods, a switchover to the last
// ordinal and 5 → 3 pods (the master moves first) under the WAIT-confirmed
// writer authenticated as the user: the new pods start with the ACL file
// and replicate as cacheops-replication, the default user is refused on
// them, and no acknowledged write is lost.
func TestUsersOnValkeyScaleUpAndDown(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-users-valkey")
	userSecret(g, ns, "app-writer", "writer-pw-1")
	cc := loadExample(t, "valkey", ns)
	cc.Spec.HighAvailability.ProbeTimeoutSeconds = 1
	cc.Spec.Users = []cachev1alpha1.UserSpec{appUser}
	start := time.Now()
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	before := waitReplicating(g, cc)
	applied := waitCondition(g, ns, cc.Name, cachev1alpha1.ConditionUsersApplied, metav1.ConditionTrue)
	t.Logf("valkey replicating with users in %s: %s", time.Since(start).Round(100*time.Millisecond), applied.Message)
	for _, n := range before.Status.Nodes {
		rc := operatorAt(g, before, pod(g, ns, n.PodName).Status.PodIP)
		info, err := rc.Info(ctx, "server").Result()
		_ = rc.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info).To(ContainSubstring("server_name:valkey\r\n"), n.PodName)
		g.Expect(info).To(ContainSubstring("valkey_version:8.0.1\r\n"), n.PodName)
	}
	expectUsersEverywhere(g, cc, "app", "writer-pw-1")
	expectAppRules(g, before, "writer-pw-1")

	masters := watchMasters(t, ns)
	t.Cleanup(masters.stop)
	wl := &workload{ns: ns, cluster: cc.Name, username: "app", password: "writer-pw-1", waitMs: 500, acked: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go wl.run()
	g.Eventually(wl.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 50))

	up := time.Now()
	mergePatch(g, cc, `{"spec":{"replicas":5}}`)
	waitNodes(g, cc, 5)
	upTook := time.Since(up)
	expectUsersEverywhere(g, cc, "app", "writer-pw-1")
	n := wl.ackedCount()
	g.Eventually(wl.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", n+20), "writes go on with 5 pods")

	// The master on an ordinal that goes away: the scale-down moves it
	// first, and the replicas follow the new master as
	// cacheops-replication.
	kubectlCache(g, "switchover", cc.Name, "-n", ns, "--to", "valkey-4", "--wait", "2m")
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		g.Expect(got.Status.CurrentMaster).To(Equal("valkey-4"))
		g.Expect(got.Status.Operation).To(BeNil())
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	down := time.Now()
	mergePatch(g, cc, `{"spec":{"replicas":3}}`)
	waitNodes(g, cc, 3)
	downTook := time.Since(down)
	final := expectUsersEverywhere(g, cc, "app", "writer-pw-1")
	g.Expect(final.Status.CurrentMaster).To(BeElementOf("valkey-0", "valkey-1", "valkey-2"))
	t.Logf("3 → 5 pods with users: %s; 5 → 3 with the master on valkey-4: %s (master %s → valkey-4 → %s)", upTook.Round(100*time.Millisecond), downTook.Round(100*time.Millisecond),
		before.Status.CurrentMaster, final.Status.CurrentMaster)

	checked := wl.finish(t, g, masters)
	wl.mu.Lock()
	defer wl.mu.Unlock()
	t.Logf("writer as app: %d acknowledged writes checked, 0 lost, %d attempts, %d unacknowledged; errors %v", checked, wl.attempts, wl.failures, wl.errs)
	for e := range wl.errs {
		g.Expect(e).NotTo(Or(ContainSubstring("NOPERM"), ContainSubstring("WRONGPASS"), ContainSubstring("NOAUTH")), "the writer's user was refused")
	}
}

// A backup of a cluster with users, taken from what the WAIT-confirmed
// writer (authenticated as the user) wrote, restored into a new cluster
// with the same users: every acknowledged key is there, the user works
// with its rules, the default user is refused, and the replicas are linked
// as cacheops-replication.
func TestRestoreIntoAClusterWithUsers(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-users-restore")
	target, store := backupTarget(g, ns, "users-restore")
	userSecret(g, ns, "app-writer", "writer-pw-1")
	cc := loadExample(t, "basic", ns)
	cc.Spec.Users = []cachev1alpha1.UserSpec{appUser}
	cc.Spec.Backup.S3 = target
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	before := waitReplicating(g, cc)
	waitCondition(g, ns, cc.Name, cachev1alpha1.ConditionUsersApplied, metav1.ConditionTrue)

	wl := &workload{ns: ns, cluster: cc.Name, username: "app", password: "writer-pw-1", waitMs: 500, acked: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go wl.run()
	g.Eventually(wl.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 500))
	wl.Stop()
	mc := operatorAt(g, before, pod(g, ns, before.Status.CurrentMaster).Status.PodIP)
	defer mc.Close()
	g.Expect(mc.Wait(ctx, 2, 10*time.Second).Val()).To(BeEquivalentTo(2), "both replicas caught up")
	size := mc.DBSize(ctx).Val()
	taken := time.Now()
	name := backupNow(g, ns, cc.Name, "--wait=2m")
	cb := getBackup(g, ns, name)
	g.Expect(cb.Status.Phase).To(Equal(cachev1alpha1.BackupCompleted), cb.Status.Message)
	g.Expect(cb.Status.Keys).To(Equal(size))
	meta, err := store.Metadata(ctx, cb.Status.Location.Key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(meta.Keys).To(Equal(cb.Status.Keys))
	t.Logf("backup %s of the cluster with users: %d keys (%d acknowledged writes), %d bytes from %s in %s",
		name, cb.Status.Keys, wl.ackedCount(), cb.Status.Size, cb.Status.SourcePod, time.Since(taken).Round(100*time.Millisecond))

	restored := loadExample(t, "basic", ns)
	restored.Name = "restored"
	restored.Spec.Users = []cachev1alpha1.UserSpec{appUser}
	restored.Spec.Restore = &cachev1alpha1.RestoreSpec{Backup: name}
	start := time.Now()
	g.Expect(k8s.Create(ctx, restored)).To(Succeed())
	waitReplicating(g, restored)
	rc := waitCondition(g, ns, "restored", cachev1alpha1.ConditionRestored, metav1.ConditionTrue)
	waitCondition(g, ns, "restored", cachev1alpha1.ConditionUsersApplied, metav1.ConditionTrue)
	took := time.Since(start)
	t.Logf("restored with users in %s: %s", took.Round(100*time.Millisecond), rc.Message)

	copyOf := &workload{ns: ns, cluster: "restored", username: "app", password: "writer-pw-1", acked: wl.acked}
	checked, lost := copyOf.Verify(g)
	t.Logf("%d acknowledged writes checked in the restored cluster (read as app), %d lost", checked, len(lost))
	g.Expect(lost).To(BeEmpty(), "acknowledged writes missing from the restored cluster")
	final := expectUsersEverywhere(g, restored, "app", "writer-pw-1")
	expectAppRules(g, final, "writer-pw-1")
}
