//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// operatorAt is a connection to a pod as the operator makes it: as
// cacheops-operator in a cluster with spec.users (the default user is
// off there), as the default user otherwise; over TLS with spec.tls.
func operatorAt(g Gomega, cc *cachev1alpha1.CacheCluster, ip string) *redis.Client {
	o := &redis.Options{Addr: ip + ":6379", Password: password(g, cc.Namespace, cc.Name), TLSConfig: clusterTLS(g, cc),
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1}
	if len(cc.Spec.Users) > 0 {
		o.Username = cachev1alpha1.OperatorUser
	}
	return redis.NewClient(o)
}

// clientUsers holds, by namespace/name, the ACL user and password a test
// of a cluster with spec.users has its clients use (clientCredentials).
var clientUsers sync.Map

// clientCredentials is who the tests' clients of a cluster authenticate
// as: the user a test registered in clientUsers, else the default user
// with the cluster's password.
func clientCredentials(g Gomega, cc *cachev1alpha1.CacheCluster) (user, pw string) {
	if v, ok := clientUsers.Load(cc.Namespace + "/" + cc.Name); ok {
		c := v.([2]string)
		return c[0], c[1]
	}
	return "", password(g, cc.Namespace, cc.Name)
}

// userAt is a client authenticated as an ACL user.
func userAt(ip, user, pw string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: ip + ":6379", Username: user, Password: pw, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
}

// auth sends AUTH user password on a new connection that authenticated
// as nobody, as a client checking a password does: PING would pass
// without AUTH (it is in @connection), AUTH says whether the password
// is accepted.
func auth(ip, user, pw string) error {
	c := redis.NewClient(&redis.Options{Addr: ip + ":6379", DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	return c.Do(context.Background(), "AUTH", user, pw).Err()
}

// userSecret creates or updates a user's password Secret.
func userSecret(g Gomega, ns, name, pw string) {
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"password": pw}}
	err := k8s.Create(ctx, s)
	if err == nil {
		return
	}
	cur := &corev1.Secret{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), cur)).To(Succeed())
	cur.Data = map[string][]byte{"password": []byte(pw)}
	g.Expect(k8s.Update(ctx, cur)).To(Succeed())
}

// podIPs are the addresses of the pods prefix-0 … prefix-(n-1).
func podIPs(g Gomega, ns, prefix string, n int) map[string]string {
	out := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		out[name] = pod(g, ns, name).Status.PodIP
	}
	return out
}

// expectRefused checks that err is Redis refusing a command for want
// (NOPERM, WRONGPASS, NOAUTH).
func expectRefused(g Gomega, err error, want, what string) {
	g.Expect(err).To(HaveOccurred(), what)
	g.Expect(err.Error()).To(ContainSubstring(want), what)
}

// examples/users: two users with their own rules. Each can do what its
// rules allow and is refused the rest on every pod; the default user is
// refused. A user added later is applied on every pod without a restart
// (same processes). A deleted pod comes back with every user (the ACL file
// in Secret shop-users). The master is killed under the WAIT-confirmed
// writer authenticated as that later user: the replicas follow the new
// master as cacheops-replication and no acknowledged write is lost.
func TestUsersAreAppliedLiveAndKeptAcrossRestarts(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-users")
	userSecret(g, ns, "app-writer", "writer-pw-1")
	userSecret(g, ns, "app-reader", "reader-pw-1")
	cc := loadExample(t, "users", ns)
	cc.Spec.HighAvailability.ProbeTimeoutSeconds = 1
	start := time.Now()
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	before := waitReplicating(g, cc)
	applied := waitCondition(g, ns, "shop", cachev1alpha1.ConditionUsersApplied, metav1.ConditionTrue)
	t.Logf("replicating with users in %s: %s", time.Since(start).Round(time.Second), applied.Message)
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cc), before)).To(Succeed())
	g.Expect(before.Status.Users).To(HaveLen(2))
	for _, u := range before.Status.Users {
		g.Expect(u.PasswordHash).To(HaveLen(12), u.Name)
		g.Expect(u.PreviousValidUntil).To(BeNil(), u.Name)
	}
	// Only hashes in what the operator wrote.
	sec := &corev1.Secret{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-users"}, sec)).To(Succeed())
	file := string(sec.Data["users.acl"])
	g.Expect(file).To(ContainSubstring("user default off"))
	g.Expect(file).NotTo(ContainSubstring("writer-pw-1"))
	g.Expect(file).NotTo(ContainSubstring(password(g, ns, "shop")))

	ips := podIPs(g, ns, "shop", 3)
	masterIP := ips[before.Status.CurrentMaster]
	pids := redisPIDs(g, ns, "shop", 3)

	w := userAt(masterIP, "writer", "writer-pw-1")
	defer w.Close()
	g.Expect(w.Set(ctx, "app:1", "one", 0).Err()).To(Succeed())
	g.Expect(w.Get(ctx, "app:1").Val()).To(Equal("one"))
	expectRefused(g, w.Set(ctx, "other:1", "x", 0).Err(), "NOPERM", "writer: a key outside ~app:*")
	expectRefused(g, w.FlushAll(ctx).Err(), "NOPERM", "writer: -@dangerous")
	g.Expect(operatorAt(g, before, masterIP).Wait(ctx, 2, 5000).Val()).To(BeEquivalentTo(2))
	for name, ip := range ips {
		r := userAt(ip, "reader", "reader-pw-1")
		g.Expect(r.Get(ctx, "app:1").Val()).To(Equal("one"), "reader on %s", name)
		expectRefused(g, r.Set(ctx, "app:2", "x", 0).Err(), "NOPERM", "reader: SET on "+name)
		expectRefused(g, r.Get(ctx, "other:1").Err(), "NOPERM", "reader: a key outside ~app:* on "+name)
		_ = r.Close()
		// The default user is off: its password (the cluster's) and no
		// user at all are refused.
		expectRefused(g, auth(ip, "default", password(g, ns, "shop")), "WRONGPASS", "default user on "+name)
		expectRefused(g, redisAt(ip, password(g, ns, "shop")).Ping(ctx).Err(), "WRONGPASS", "AUTH <password> on "+name)
		anon := redis.NewClient(&redis.Options{Addr: ip + ":6379", MaxRetries: -1})
		expectRefused(g, anon.Get(ctx, "app:1").Err(), "NOAUTH", "no user on "+name)
		_ = anon.Close()
		// Nor does a user's password open the operator's user.
		expectRefused(g, auth(ip, cachev1alpha1.OperatorUser, "writer-pw-1"), "WRONGPASS", "operator user with another password")
	}
	// The replication user runs only what a replica needs.
	repl := userAt(masterIP, cachev1alpha1.ReplicationUser, password(g, ns, "shop"))
	expectRefused(g, repl.Get(ctx, "app:1").Err(), "NOPERM", "replication user: GET")
	expectRefused(g, repl.ConfigGet(ctx, "maxmemory").Err(), "NOPERM", "replication user: CONFIG")
	_ = repl.Close()

	// A user added later: applied live, on every pod, no restart.
	userSecret(g, ns, "app-loader", "loader-pw-1")
	cur := &cachev1alpha1.CacheCluster{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cc), cur)).To(Succeed())
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Users = append(cur.Spec.Users, cachev1alpha1.UserSpec{
		Name: "loader", PasswordSecret: cachev1alpha1.SecretKeyRef{Name: "app-loader"}, Rules: "~w:* +@read +@write +wait -@dangerous",
	})
	added := time.Now()
	g.Expect(k8s.Patch(ctx, cur, patch)).To(Succeed())
	for name, ip := range ips {
		g.Eventually(func() error { return auth(ip, "loader", "loader-pw-1") }, limits.PodRestart, limits.Poll).Should(Succeed(), "loader on %s", name)
	}
	t.Logf("a user added to spec.users authenticated on every pod %s after the update", time.Since(added).Round(100*time.Millisecond))
	expectSameProcesses(g, ns, pids, "kept its process while a user was added")
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cc), got)).To(Succeed())
		g.Expect(got.Status.Users).To(HaveLen(3))
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(eventsByReason(g, ns)[cachev1alpha1.EventUsersApplied]).NotTo(BeEmpty())
	}, limits.PodRestart, limits.Poll).Should(Succeed())

	// A replica deleted: its new process reads the ACL file.
	var replica string
	for name := range ips {
		if name != before.Status.CurrentMaster {
			replica = name
			break
		}
	}
	g.Expect(k8s.Delete(ctx, pod(g, ns, replica))).To(Succeed())
	// Its own Gomega: until the StatefulSet has made the pod again, it
	// is not found.
	g.Eventually(func(g Gomega) {
		p := pod(g, ns, replica)
		g.Expect(p.Status.PodIP != "" && podReady(p)).To(BeTrue(), "%s not ready", replica)
		pid, err := env.PID(ns, replica, "redis")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pid).NotTo(Equal(pids[replica]), "%s not restarted", replica)
		g.Expect(auth(p.Status.PodIP, "loader", "loader-pw-1")).To(Succeed())
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	after := waitReplicating(g, cc)
	rip := pod(g, ns, replica).Status.PodIP
	r := userAt(rip, "reader", "reader-pw-1")
	g.Expect(r.Get(ctx, "app:1").Val()).To(Equal("one"), "the recreated replica has the data and the reader")
	_ = r.Close()
	expectRefused(g, auth(rip, "default", password(g, ns, "shop")), "WRONGPASS", "default user on the recreated pod")
	t.Logf("%s recreated: users from the ACL file, replicating from %s as %s", replica, after.Status.CurrentMaster, cachev1alpha1.ReplicationUser)

	// The master killed under the writer (as loader).
	masters := watchMasters(t, ns)
	t.Cleanup(masters.stop)
	wl := &workload{ns: ns, cluster: "shop", username: "loader", password: "loader-pw-1", waitMs: 500, acked: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go wl.run()
	g.Eventually(wl.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 50))
	old := after.Status.CurrentMaster
	g.Expect(env.KillContainer(ns, old, "redis")).To(Succeed())
	killed := time.Now()
	n := wl.ackedCount()
	g.Eventually(wl.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", n+50), "writes resume after the kill")
	t.Logf("writes resumed %s after the master was killed", time.Since(killed).Round(100*time.Millisecond))
	final := waitReplicating(g, cc)
	g.Expect(final.Status.CurrentMaster).NotTo(Equal(old), "the killed master was replaced")
	t.Logf("master %s → %s with users", old, final.Status.CurrentMaster)
	wl.finish(t, g, masters)
	wl.mu.Lock()
	t.Logf("writer errors: %v", wl.errs)
	for e := range wl.errs {
		g.Expect(e).NotTo(Or(ContainSubstring("NOPERM"), ContainSubstring("WRONGPASS"), ContainSubstring("NOAUTH")), "the writer's user was refused")
	}
	wl.mu.Unlock()
	// The killed master came back as a replica, with the users.
	oldIP := pod(g, ns, old).Status.PodIP
	g.Expect(auth(oldIP, "reader", "reader-pw-1")).To(Succeed())
	expectRefused(g, auth(oldIP, "default", password(g, ns, "shop")), "WRONGPASS", "default user on the restarted master")
}

// A user's password rotated under the writer, with a 45 s window (the
// checks that the old password is still accepted wait for the status and
// the writer first; 20 s left little room on a loaded machine): once the
// new password is accepted the old one still is, until the window ends; then only the new one. The writer switches to the new password
// within the window and sees no authentication error; no pod restarts and
// no acknowledged write is lost.
func TestUserPasswordRotationUnderLoad(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-users-rotate")
	userSecret(g, ns, "app-writer", "writer-pw-1")
	userSecret(g, ns, "app-reader", "reader-pw-1")
	userSecret(g, ns, "app-loader", "loader-old")
	cc := loadExample(t, "users", ns)
	cc.Name = "rotate"
	cc.Spec.HighAvailability.ProbeTimeoutSeconds = 1
	window := 45 * time.Second
	cc.Spec.Users = append(cc.Spec.Users, cachev1alpha1.UserSpec{
		Name: "loader", PasswordSecret: cachev1alpha1.SecretKeyRef{Name: "app-loader"}, Rules: "~w:* +@read +@write +wait -@dangerous",
		PreviousPasswordValidFor: &metav1.Duration{Duration: window},
	})
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	before := waitReplicating(g, cc)
	waitCondition(g, ns, "rotate", cachev1alpha1.ConditionUsersApplied, metav1.ConditionTrue)
	ips := podIPs(g, ns, "rotate", 3)
	pids := redisPIDs(g, ns, "rotate", 3)
	masterIP := ips[before.Status.CurrentMaster]

	masters := watchMasters(t, ns)
	t.Cleanup(masters.stop)
	wl := &workload{ns: ns, cluster: "rotate", username: "loader", password: "loader-old", waitMs: 500, acked: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go wl.run()
	g.Eventually(wl.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 50))

	// The password changes in the Secret.
	userSecret(g, ns, "app-loader", "loader-new")
	changed := time.Now()
	for name, ip := range ips {
		g.Eventually(func() error { return auth(ip, "loader", "loader-new") }, limits.PodRestart, 200*time.Millisecond).Should(Succeed(), "new password on %s", name)
	}
	accepted := time.Now()
	t.Logf("new password accepted on every pod %s after the Secret changed", accepted.Sub(changed).Round(100*time.Millisecond))
	// Both passwords now, on every pod.
	for name, ip := range ips {
		g.Expect(auth(ip, "loader", "loader-old")).To(Succeed(), "old password still accepted on %s within the window", name)
	}
	got := &cachev1alpha1.CacheCluster{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cc), got)).To(Succeed())
		var loader *cachev1alpha1.UserStatus
		for i := range got.Status.Users {
			if got.Status.Users[i].Name == "loader" {
				loader = &got.Status.Users[i]
			}
		}
		g.Expect(loader).NotTo(BeNil())
		g.Expect(loader.PreviousValidUntil).NotTo(BeNil())
		g.Expect(loader.PreviousPasswordHash).To(HaveLen(12))
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	t.Logf("status: %+v", got.Status.Users)

	// The writer switches within the window, without a failed write.
	failuresBefore := func() int { wl.mu.Lock(); defer wl.mu.Unlock(); return wl.failures }()
	wl.mu.Lock()
	wl.password, wl.reconnect = "loader-new", true
	wl.mu.Unlock()
	n := wl.ackedCount()
	g.Eventually(wl.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", n+50), "writes go on with the new password")
	g.Expect(auth(masterIP, "loader", "loader-old")).To(Succeed(), "the switch happened within the window")

	// After the window: the old password is refused everywhere.
	for name, ip := range ips {
		g.Eventually(func() error { return auth(ip, "loader", "loader-old") }, window+time.Minute, 200*time.Millisecond).
			Should(MatchError(ContainSubstring("WRONGPASS")), "old password refused on %s after the window", name)
	}
	refused := time.Now()
	t.Logf("old password refused everywhere %s after the new one was accepted (window %s)", refused.Sub(accepted).Round(100*time.Millisecond), window)
	g.Expect(refused.Sub(changed)).To(BeNumerically(">=", window-2*time.Second), "not before the window ended")
	for name, ip := range ips {
		g.Expect(auth(ip, "loader", "loader-new")).To(Succeed(), "new password on %s", name)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cc), got)).To(Succeed())
		for _, u := range got.Status.Users {
			g.Expect(u.PreviousValidUntil).To(BeNil(), u.Name)
		}
	}, limits.PodRestart, limits.Poll).Should(Succeed())
	// Events are sent after the status is written, asynchronously.
	g.Eventually(func(g Gomega) {
		reasons := eventsByReason(g, ns)
		g.Expect(reasons[cachev1alpha1.EventPasswordRotated]).NotTo(BeEmpty())
		g.Expect(reasons[cachev1alpha1.EventPreviousPasswordExpired]).NotTo(BeEmpty())
	}, limits.PodRestart, limits.Poll).Should(Succeed())

	checked := wl.finish(t, g, masters)
	wl.mu.Lock()
	failuresAfter := wl.failures
	var authErrs []string
	for e := range wl.errs {
		if strings.Contains(e, "WRONGPASS") || strings.Contains(e, "NOAUTH") || strings.Contains(e, "NOPERM") {
			authErrs = append(authErrs, e)
		}
	}
	t.Logf("writer: %d acknowledged writes checked, %d failed writes in all (%d before the switch), errors %v", checked, failuresAfter, failuresBefore, wl.errs)
	wl.mu.Unlock()
	g.Expect(authErrs).To(BeEmpty(), "the writer saw an authentication error")
	expectSameProcesses(g, ns, pids, "kept its process through the rotation")
}

// examples/sharded with a user for the clients grows from 3 to 4 shards
// under the WAIT-confirmed cluster-aware writer (authenticated as that
// user): the operator forms the shards and moves slots and keys
// (MIGRATE … AUTH2 cacheops-operator) with its own user only, the pods
// having loaded the ACL file at start; no acknowledged write is lost.
func TestShardedReshardWithUsers(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-users-sharded")
	userSecret(g, ns, "app-all", "app-pw-1")
	cc := loadExample(t, "sharded", ns)
	cc.Spec.Users = []cachev1alpha1.UserSpec{{Name: "app", PasswordSecret: cachev1alpha1.SecretKeyRef{Name: "app-all"},
		Rules: "~* +@read +@write -@dangerous +wait +ping +cluster|slots +cluster|shards +cluster|nodes +readonly +command"}}
	clientUsers.Store(ns+"/"+cc.Name, [2]string{"app", "app-pw-1"})
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	waitShardsServing(g, cc)
	waitCondition(g, ns, cc.Name, cachev1alpha1.ConditionUsersApplied, metav1.ConditionTrue)
	ip := pod(g, ns, cc.Name+"-0").Status.PodIP
	expectRefused(g, auth(ip, "default", password(g, ns, cc.Name)), "WRONGPASS", "the default user of a sharded cluster")
	app := userAt(ip, "app", "app-pw-1")
	expectRefused(g, app.FlushAll(ctx).Err(), "NOPERM", "app: FLUSHALL")
	_ = app.Close()
	preloadSharded(g, cc, reshardKeys)
	before := checkResharded(g, cc)
	w := writeDuringReshard(t, g, cc)

	start := time.Now()
	setShards(g, cc, 4)
	up := checkResharded(g, cc)
	took := time.Since(start)
	moved := movedKeys(before, 3, 4)
	t.Logf("3 → 4 shards with users: %s, %d keys in moved slots, %.0f keys/s over the whole operation", took.Round(time.Millisecond), moved, float64(moved)/took.Seconds())
	_ = up
	checkNothingLost(t, g, cc, w)
	// The new shard's pods loaded the users at start.
	for _, p := range []string{cc.Name + "-6", cc.Name + "-7"} {
		pip := pod(g, ns, p).Status.PodIP
		g.Expect(auth(pip, "app", "app-pw-1")).To(Succeed(), p)
		expectRefused(g, auth(pip, "default", password(g, ns, cc.Name)), "WRONGPASS", "default user on "+p)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(eventsByReason(g, ns)[cachev1alpha1.EventSlotsMoving]).NotTo(BeEmpty())
	}, limits.PodRestart, limits.Poll).Should(Succeed())
}

// usersAddedPreload is how many keys TestUsersAddedToARunningCluster
// writes as the default user before the cluster has users.
const usersAddedPreload = 1000

// examples/basic runs without users and holds data written as the default
// user; then spec.users gets its first user. The user is applied live at
// once, but a pod started without the ACL file keeps its default user on
// (its readiness probe authenticates as default) until it restarts onto
// the new pod template (--aclfile, --masteruser, the probe's --user). What
// a user expects, and what this test asserts, is the end state: within
// limits.PodRestart per pod, on every pod the new user works and the
// default user is refused, and the pods replicate. It logs how the
// operator got there (the rolling restart, in order, with times). The
// WAIT-confirmed writer, authenticated as the new user from the moment
// the master accepts it, loses no acknowledged write; a backup afterwards
// (streamed as the operator's user) holds every key.
func TestUsersAddedToARunningCluster(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-users-added")
	target, store := backupTarget(g, ns, "users-added")
	cc := loadExample(t, "basic", ns)
	cc.Spec.HighAvailability.ProbeTimeoutSeconds = 1
	cc.Spec.Backup.S3 = target
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	before := waitReplicating(g, cc)
	pw := password(g, ns, "basic")
	oldMaster := before.Status.CurrentMaster
	preload(g, oldMaster, ns, pw, usersAddedPreload)
	names := []string{"basic-0", "basic-1", "basic-2"}
	uids := map[string]types.UID{}
	for _, name := range names {
		p := pod(g, ns, name)
		uids[name] = p.UID
		// Without users the default user with the cluster's password
		// is how everyone connects.
		g.Expect(auth(p.Status.PodIP, "default", pw)).To(Succeed(), name)
		g.Expect(startedWithACL(p)).To(BeFalse(), name)
	}
	masterIP := pod(g, ns, oldMaster).Status.PodIP
	masters := watchMasters(t, ns)
	t.Cleanup(masters.stop)

	// The first user.
	userSecret(g, ns, "app-writer", "writer-pw-1")
	patched := time.Now()
	mergePatch(g, cc, `{"spec":{"users":[{"name":"app","passwordSecret":{"name":"app-writer"},"rules":"~w:* +@read +@write +wait -@dangerous"}]}}`)
	describe := usersAddedState(ns, names, uids, patched, "app", "writer-pw-1", pw)

	// The writer starts as soon as the master accepts the user.
	g.Eventually(func() error { return auth(masterIP, "app", "writer-pw-1") }, limits.PodRestart, 50*time.Millisecond).Should(Succeed(), describe)
	onMaster := time.Since(patched)
	restartsThen := len(restartsInOrder(g, ns))
	wl := &workload{ns: ns, cluster: "basic", username: "app", password: "writer-pw-1", waitMs: 500, acked: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go wl.run()
	writerStarted := time.Now()
	applied := waitCondition(g, ns, "basic", cachev1alpha1.ConditionUsersApplied, metav1.ConditionTrue)
	t.Logf("user app accepted by the master %s after the patch (%d pods restarted by then), writer started; UsersApplied=True %s after the patch: %s",
		onMaster.Round(100*time.Millisecond), restartsThen, time.Since(patched).Round(100*time.Millisecond), applied.Message)
	g.Eventually(wl.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 50), describe)

	// The end state a user expects, on every pod.
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		g.Expect(got.Status.Operation).To(BeNil(), "an operation still runs")
		g.Expect(got.Status.CurrentMaster).NotTo(BeEmpty())
		ips := map[string]string{}
		for _, name := range names {
			p := pod(g, ns, name)
			g.Expect(p.DeletionTimestamp).To(BeNil(), name+" is being deleted")
			g.Expect(podReady(p)).To(BeTrue(), name+" is not ready")
			ips[name] = p.Status.PodIP
			g.Expect(auth(p.Status.PodIP, "app", "writer-pw-1")).To(Succeed(), "user app on "+name)
			expectRefused(g, auth(p.Status.PodIP, "default", pw), "WRONGPASS", "the default user on "+name)
		}
		mc := operatorAt(g, got, ips[got.Status.CurrentMaster])
		info, err := mc.Info(ctx, "replication").Result()
		_ = mc.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info).To(ContainSubstring("role:master\r\n"))
		g.Expect(info).To(ContainSubstring("connected_slaves:2\r\n"))
		g.Expect(strings.Count(info, ",state=online,")).To(Equal(2), info)
		for _, name := range names {
			if name == got.Status.CurrentMaster {
				continue
			}
			rc := operatorAt(g, got, ips[name])
			info, err := rc.Info(ctx, "replication").Result()
			_ = rc.Close()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(info).To(ContainSubstring("master_host:"+ips[got.Status.CurrentMaster]+"\r\n"), name)
			g.Expect(info).To(ContainSubstring("master_link_status:up\r\n"), name)
		}
	}, time.Duration(len(names))*limits.PodRestart, time.Second).Should(Succeed(), describe)
	convergedAt := time.Now()
	converged := convergedAt.Sub(patched)
	t.Logf("every pod: user app accepted, default user refused, replicating; %s after the patch", converged.Round(100*time.Millisecond))
	t.Logf("state at convergence:%s", describe())

	// How it got there: every pod was recreated on the template with the
	// ACL file, replicas first, the old master last.
	order := restartsInOrder(g, ns)
	t.Logf("restart order (PodRestarted Events): %v; the master before was %s", order, oldMaster)
	for _, e := range eventsByReason(g, ns)[cachev1alpha1.EventOperationStarted] {
		t.Logf("OperationStarted %s: %s", eventTime(e).Format("15:04:05"), e.Message)
	}
	for _, name := range names {
		p := pod(g, ns, name)
		g.Expect(p.UID).NotTo(Equal(uids[name]), "%s was not recreated", name)
		g.Expect(startedWithACL(p)).To(BeTrue(), "%s runs without --aclfile", name)
	}
	g.Expect(order).To(ConsistOf(names), "each pod restarted once")
	g.Expect(order[len(order)-1]).To(Equal(oldMaster), "the old master restarts last")

	// The user's rules, on every pod; nobody else gets in.
	final := waitReplicating(g, cc)
	newMasterIP := pod(g, ns, final.Status.CurrentMaster).Status.PodIP
	w := userAt(newMasterIP, "app", "writer-pw-1")
	g.Expect(w.Set(ctx, "w:rules", "ok", 0).Err()).To(Succeed())
	g.Expect(w.Do(ctx, "WAIT", 2, 5000).Int64()).To(Equal(int64(2)))
	expectRefused(g, w.Set(ctx, "other:1", "x", 0).Err(), "NOPERM", "app: a key outside ~w:*")
	expectRefused(g, w.Get(ctx, "preload:1").Err(), "NOPERM", "app: a key written before the users")
	expectRefused(g, w.FlushAll(ctx).Err(), "NOPERM", "app: -@dangerous")
	_ = w.Close()
	for _, name := range names {
		ip := pod(g, ns, name).Status.PodIP
		r := userAt(ip, "app", "writer-pw-1")
		g.Expect(r.Get(ctx, "w:rules").Val()).To(Equal("ok"), "app reads on %s", name)
		_ = r.Close()
		expectRefused(g, redisAt(ip, pw).Ping(ctx).Err(), "WRONGPASS", "AUTH <password> on "+name)
		anon := redis.NewClient(&redis.Options{Addr: ip + ":6379", MaxRetries: -1})
		expectRefused(g, anon.Get(ctx, "w:rules").Err(), "NOAUTH", "no user on "+name)
		_ = anon.Close()
	}

	// The writer, across the whole change.
	checked := wl.finish(t, g, masters)
	pause := wl.longestPause(writerStarted, convergedAt) // takes wl.mu itself
	wl.mu.Lock()
	attempts, failures := wl.attempts, wl.failures
	var authErrs []string
	for e := range wl.errs {
		if strings.Contains(e, "WRONGPASS") || strings.Contains(e, "NOAUTH") || strings.Contains(e, "NOPERM") {
			authErrs = append(authErrs, e)
		}
	}
	t.Logf("writer as app: %d acknowledged writes checked, %d attempts, %d unacknowledged, longest pause %s; errors %v",
		checked, attempts, failures, pause.Round(time.Millisecond), wl.errs)
	wl.mu.Unlock()
	g.Expect(authErrs).To(BeEmpty(), "the writer's user was refused")

	// The data written before the users is still there.
	mc := operatorAt(g, final, newMasterIP)
	defer mc.Close()
	keys := make([]string, usersAddedPreload)
	for i := range keys {
		keys[i] = fmt.Sprintf("preload:%d", i)
	}
	g.Expect(mc.Exists(ctx, keys...).Val()).To(BeEquivalentTo(usersAddedPreload), "keys written before the users")

	// A backup of the cluster with users: streamed as the operator's user.
	g.Expect(mc.Wait(ctx, 2, 10*time.Second).Val()).To(BeEquivalentTo(2), "both replicas caught up")
	size := mc.DBSize(ctx).Val()
	g.Expect(size).To(BeNumerically(">=", usersAddedPreload+checked+1))
	name := backupNow(g, ns, "basic", "--wait=2m")
	cb := getBackup(g, ns, name)
	g.Expect(cb.Status.Phase).To(Equal(cachev1alpha1.BackupCompleted), cb.Status.Message)
	g.Expect(cb.Status.Keys).To(Equal(size))
	g.Expect(cb.Status.SourcePod).NotTo(Equal(final.Status.CurrentMaster), "taken from a replica")
	meta, err := store.Metadata(ctx, cb.Status.Location.Key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(meta.Keys).To(Equal(cb.Status.Keys))
	t.Logf("backup %s: %d keys (%d preloaded, %d acknowledged writes, the rest unacknowledged or the rules check), %d bytes from %s",
		name, cb.Status.Keys, usersAddedPreload, checked, cb.Status.Size, cb.Status.SourcePod)
	g.Eventually(func(g Gomega) {
		g.Expect(eventsByReason(g, ns)[cachev1alpha1.EventUsersApplied]).NotTo(BeEmpty())
	}, limits.PodRestart, limits.Poll).Should(Succeed())
}

// startedWithACL says whether a pod's redis container was started with
// the ACL file (the template of a cluster with spec.users).
func startedWithACL(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == "redis" && slices.Contains(c.Args, "--aclfile") {
			return true
		}
	}
	return false
}

// authIfIP is auth for a pod that may have no address yet (an empty one
// would reach the host's own port 6379).
func authIfIP(ip, user, pw string) error {
	if ip == "" {
		return nil
	}
	return auth(ip, user, pw)
}

// usersAddedState says, pod by pod, where a cluster that got its first
// users stands: recreated or not, since when it runs, with or without the
// ACL file, whether the user and the default user are accepted; then the
// cluster's phase, operation, UsersApplied and the restarts so far. It is
// the message of a wait that did not end, and a log line.
func usersAddedState(ns string, names []string, uids map[string]types.UID, since time.Time, user, userPw, clusterPw string) func() string {
	return func() string {
		ctx := context.Background()
		var b strings.Builder
		for _, name := range names {
			p := &corev1.Pod{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
				fmt.Fprintf(&b, "\n  %s: %v", name, err)
				continue
			}
			started := "not running"
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == "redis" {
					started = containerState(cs)
					if cs.State.Running != nil {
						started += fmt.Sprintf(" (%+.1fs after the patch)", cs.State.Running.StartedAt.Sub(since).Seconds())
					}
				}
			}
			result := func(err error) string {
				if p.Status.PodIP == "" {
					return "no IP"
				}
				if err == nil {
					return "accepted"
				}
				return err.Error()
			}
			fmt.Fprintf(&b, "\n  %s: recreated %t, role %q, ready %t, --aclfile %t, %s; AUTH %s: %s; AUTH default: %s",
				name, p.UID != uids[name], p.Labels[cachev1alpha1.LabelRole], podReady(p), startedWithACL(p), started,
				user, result(authIfIP(p.Status.PodIP, user, userPw)), result(authIfIP(p.Status.PodIP, "default", clusterPw)))
		}
		cc := &cachev1alpha1.CacheCluster{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, cc); err == nil {
			fmt.Fprintf(&b, "\n  phase %s, master %s", cc.Status.Phase, cc.Status.CurrentMaster)
			if op := cc.Status.Operation; op != nil {
				fmt.Fprintf(&b, ", operation %s step %s: %s", op.Type, op.Step, op.Reason)
			}
			for _, c := range cc.Status.Conditions {
				if c.Type == cachev1alpha1.ConditionUsersApplied || c.Type == cachev1alpha1.ConditionReady {
					fmt.Fprintf(&b, "\n  %s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message)
				}
			}
		}
		events := &corev1.EventList{}
		if err := k8s.List(ctx, events, client.InNamespace(ns)); err == nil {
			sort.Slice(events.Items, func(i, j int) bool { return eventTime(events.Items[i]).Before(eventTime(events.Items[j])) })
			for _, e := range events.Items {
				if e.InvolvedObject.Kind == "CacheCluster" && eventTime(e).After(since.Add(-time.Second)) {
					fmt.Fprintf(&b, "\n  event %+.1fs %s: %s", eventTime(e).Sub(since).Seconds(), e.Reason, e.Message)
				}
			}
		}
		return b.String()
	}
}
