package daytwo_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// passwordHash is how Redis stores a password: SHA-256 in hex.
func passwordHash(pw string) string {
	sum := sha256.Sum256([]byte(pw))
	return hex.EncodeToString(sum[:])
}

// authOn sends AUTH user password on a fresh connection to ip.
func authOn(ip, user, pw string) error {
	c := redis.NewClient(&redis.Options{Addr: ip + ":6379", MaxRetries: -1, PoolSize: 1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	return c.Do(context.Background(), "AUTH", user, pw).Err()
}

// secretReads counts the controller's reads of Secrets from the API
// server, by name.
type secretReads struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *secretReads) wrap(r client.Reader) client.Reader { return countingReader{r, s} }

func (s *secretReads) of(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[name]
}

type countingReader struct {
	client.Reader
	s *secretReads
}

func (c countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		c.s.mu.Lock()
		if c.s.n == nil {
			c.s.n = map[string]int{}
		}
		c.s.n[key.Name]++
		c.s.mu.Unlock()
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// spec.users on pods that started before it (no ACL file: the transition
// of a running cluster): the users are applied live on every pod, the
// operator switches to its own user, masteruser is set; a rotation keeps
// both passwords for the window and drops the old one at its end (day-two
// requeues itself for it); a missing Secret is reported; removing the
// users deletes them and Secret <name>-users.
func TestIntegrationUsersLiveAndRotation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	window := 3 * time.Second
	appSecret := func(ns, pw string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Data: map[string][]byte{"password": []byte(pw)}}
		if err := k8s.Create(ctx, s); apierrors.IsAlreadyExists(err) {
			must(t, k8s.Update(ctx, s))
		} else {
			must(t, err)
		}
	}
	reads := &secretReads{}
	c := newCluster(t, clusterOpts{subnet: 41, pods: 3,
		beforeCreate: func(c *cluster) { appSecret(c.ns, "one") },
		apiReader:    reads.wrap,
		spec: func(s *cachev1alpha1.CacheClusterSpec) {
			s.Users = []cachev1alpha1.UserSpec{{Name: "app", PasswordSecret: cachev1alpha1.SecretKeyRef{Name: "app", Key: "password"},
				Rules: "~app:* +@read +@write", PreviousPasswordValidFor: &metav1.Duration{Duration: window}}}
		}})
	c.waitReplicating(g)

	g.Eventually(func(g Gomega) {
		cc := c.get(g)
		g.Expect(meta.IsStatusConditionTrue(cc.Status.Conditions, cachev1alpha1.ConditionUsersApplied)).To(BeTrue())
		for _, p := range c.pods {
			g.Expect(authOn(c.ips[p], "app", "one")).To(Succeed(), p)
			g.Expect(authOn(c.ips[p], cachev1alpha1.OperatorUser, c.password)).To(Succeed(), p)
		}
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	sec := &corev1.Secret{}
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: "cache-users"}, sec))
	g.Expect(string(sec.Data["users.acl"])).To(ContainSubstring("user app reset on #" + passwordHash("one") + " ~app:* +@read +@write\n"))
	g.Expect(string(sec.Data["users.acl"])).NotTo(ContainSubstring(c.password))
	g.Expect(metav1.IsControlledBy(sec, c.get(g))).To(BeFalse(), "day-one prunes only what it controls")
	for _, p := range c.pods {
		app := redis.NewClient(&redis.Options{Addr: c.ips[p] + ":6379", Username: "app", Password: "one", MaxRetries: -1})
		err := app.Set(ctx, "other:1", "x", 0).Err()
		g.Expect(err).To(MatchError(ContainSubstring("NOPERM")), p)
		_ = app.Close()
		rc := redisAt(c.ips[p], c.password)
		g.Expect(rc.ConfigGet(ctx, "masteruser").Val()).To(HaveKeyWithValue("masteruser", cachev1alpha1.ReplicationUser), p)
		_ = rc.Close()
	}

	// The users' Secret is watched, not polled: a cluster at rest
	// does not read it (the poll it replaced read it every 10 s).
	before := reads.of("app")
	time.Sleep(12 * time.Second)
	g.Expect(reads.of("app")).To(Equal(before), "reads of the user's Secret while nothing changed")

	// Rotation.
	appSecret(c.ns, "two")
	changed := time.Now()
	g.Eventually(func(g Gomega) {
		for _, p := range c.pods {
			g.Expect(authOn(c.ips[p], "app", "two")).To(Succeed(), p)
		}
	}).WithTimeout(deadline).WithPolling(50 * time.Millisecond).Should(Succeed())
	accepted := time.Now()
	t.Logf("new password on every pod %s after the Secret changed; the Secret was read %d times in all", accepted.Sub(changed).Round(10*time.Millisecond), reads.of("app"))
	for _, p := range c.pods {
		g.Expect(authOn(c.ips[p], "app", "one")).To(Succeed(), "the old password within the window on %s", p)
	}
	g.Eventually(func(g Gomega) {
		us := c.get(g).Status.Users
		g.Expect(us).To(HaveLen(1))
		g.Expect(us[0].PasswordHash).To(Equal(passwordHash("two")[:12]))
		g.Expect(us[0].PreviousPasswordHash).To(Equal(passwordHash("one")[:12]))
		g.Expect(us[0].PreviousValidUntil).NotTo(BeNil())
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		for _, p := range c.pods {
			g.Expect(authOn(c.ips[p], "app", "one")).To(MatchError(ContainSubstring("WRONGPASS")), p)
		}
	}).WithTimeout(window + 20*time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	t.Logf("old password refused %s after the new one was accepted (window %s)", time.Since(accepted).Round(10*time.Millisecond), window)
	// Events are sent after the status is written, asynchronously.
	g.Eventually(func(g Gomega) {
		g.Expect(c.events(g)).To(HaveKey(cachev1alpha1.EventPasswordRotated))
		g.Expect(c.events(g)).To(HaveKey(cachev1alpha1.EventPreviousPasswordExpired))
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())

	// A user whose Secret is missing.
	// A merge patch, not an update: day-two writes status meanwhile, which
	// changes the resourceVersion an update would have to match.
	cc := c.get(g)
	patch := client.MergeFrom(cc.DeepCopy())
	cc.Spec.Users = append(cc.Spec.Users, cachev1alpha1.UserSpec{Name: "ghost", PasswordSecret: cachev1alpha1.SecretKeyRef{Name: "nowhere", Key: "password"}})
	must(t, k8s.Patch(ctx, cc, patch))
	g.Eventually(func(g Gomega) {
		cond := meta.FindStatusCondition(c.get(g).Status.Conditions, cachev1alpha1.ConditionUsersApplied)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(cachev1alpha1.ReasonUserSecretMissing))
		g.Expect(cond.Message).To(ContainSubstring("user ghost: Secret nowhere does not exist"))
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	g.Expect(authOn(c.ips[c.pods[0]], "app", "two")).To(Succeed(), "the other users are kept")

	// Users removed.
	cc = c.get(g)
	patch = client.MergeFrom(cc.DeepCopy())
	cc.Spec.Users = nil
	must(t, k8s.Patch(ctx, cc, patch))
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: "cache-users"}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		got := c.get(g)
		g.Expect(got.Status.Users).To(BeNil())
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionUsersApplied)).To(BeNil())
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	for _, p := range c.pods {
		err := authOn(c.ips[p], "app", "two")
		g.Expect(err).To(HaveOccurred(), p)
		g.Expect(strings.Contains(err.Error(), "WRONGPASS")).To(BeTrue(), p)
		rc := redisAt(c.ips[p], c.password)
		g.Expect(rc.ConfigGet(ctx, "masteruser").Val()).To(HaveKeyWithValue("masteruser", ""), p)
		_ = rc.Close()
	}
	c.waitReplicating(g)
}

// A sharded cluster with spec.users grows from 3 to 4 shards under the
// writer: day-two forms the shards, moves the slots and their keys
// (MIGRATE … AUTH2 cacheops-operator, which runs RESTORE-ASKING as that
// user on the target) with only the commands the operator's user allows.
// The pods started before the users (no ACL file), so their default user
// stays on for the harness's own checks; every day-two connection is the
// operator's user.
func TestIntegrationUsersShardedReshard(t *testing.T) {
	t.Parallel()
	opts := shardedOpts(42)
	opts.pods, opts.objects = 8, 6
	sharded := opts.spec
	opts.beforeCreate = func(c *cluster) {
		must(t, k8s.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "app"}, Data: map[string][]byte{"password": []byte("one")}}))
	}
	opts.spec = func(s *cachev1alpha1.CacheClusterSpec) {
		sharded(s)
		s.Users = []cachev1alpha1.UserSpec{{Name: "app", PasswordSecret: cachev1alpha1.SecretKeyRef{Name: "app", Key: "password"}, Rules: "~* +@read +@write +cluster|slots +cluster|shards +cluster|nodes +readonly +command"}}
	}
	c := newCluster(t, opts)
	g := NewWithT(t)
	c.waitShards(g, formedShards)
	g.Eventually(func(g Gomega) {
		g.Expect(meta.IsStatusConditionTrue(c.get(g).Status.Conditions, cachev1alpha1.ConditionUsersApplied)).To(BeTrue())
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	ctx := context.Background()
	app := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.ips["cache-0"] + ":6379"}, Username: "app", Password: "one"})
	defer app.Close()
	const preloaded = 3000
	for i := range preloaded {
		g.Expect(app.Set(ctx, fmt.Sprintf("pre:%06d", i), i, 0).Err()).To(Succeed())
	}
	w := c.startClusterWriter()
	g.Eventually(w.ackedCount).WithTimeout(deadline).WithPolling(poll).Should(BeNumerically(">", 100))
	start := time.Now()
	c.setShards(g, 4)
	c.resize(g, 8)
	c.waitShards(g, evenShards(4))
	t.Logf("3 → 4 shards with users: %s", time.Since(start).Round(time.Millisecond))
	w.Stop()
	checked, lost := w.lost(g, c)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	for i := range preloaded {
		g.Expect(app.Get(ctx, fmt.Sprintf("pre:%06d", i)).Int()).To(Equal(i))
	}
	t.Logf("%d acknowledged writes and %d preloaded keys read back as user app", checked, preloaded)
	g.Eventually(func(g Gomega) {
		g.Expect(c.events(g)[cachev1alpha1.EventSlotsMoving]).NotTo(BeEmpty())
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	// The pods added by the resize got the users too.
	for _, p := range []string{"cache-6", "cache-7"} {
		g.Eventually(func() error { return authOn(c.ips[p], "app", "one") }).WithTimeout(deadline).WithPolling(poll).Should(Succeed(), p)
	}
}

// A cluster whose spec.auth.secretRef names a Secret that does not exist
// yet waits for it without looking every few seconds (the routine 30 s
// recheck is the fallback), and starts as soon as the Secret is created:
// the Secrets' metadata watch wakes it. Well within 15 s, half the
// fallback, or the wake-up did not come from the watch.
func TestIntegrationASecretRefCreatedLaterWakesTheCluster(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	reads := &secretReads{}
	c := newCluster(t, clusterOpts{subnet: 43, pods: 2, apiReader: reads.wrap,
		spec: func(s *cachev1alpha1.CacheClusterSpec) {
			s.Auth.SecretRef = &cachev1alpha1.SecretKeyRef{Name: "team-password", Key: "pw"}
		}})
	// Day-two has looked and found nothing to read.
	time.Sleep(3 * time.Second)
	g.Expect(c.get(g).Status.CurrentMaster).To(BeEmpty())
	g.Expect(reads.of("team-password")).To(BeZero(), "a Secret the metadata cache does not hold is not read")
	created := time.Now()
	must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "team-password"}, Data: map[string][]byte{"pw": []byte(c.password)}}))
	g.Eventually(func(g Gomega) {
		g.Expect(c.get(g).Status.CurrentMaster).NotTo(BeEmpty())
	}).WithTimeout(15 * time.Second).WithPolling(poll).Should(Succeed())
	t.Logf("replicating %s after the Secret was created; read %d times", time.Since(created).Round(10*time.Millisecond), reads.of("team-password"))
}
