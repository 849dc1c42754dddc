//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// clusterTLS is the client side of TLS for a cluster with spec.tls, as a
// client in the cluster sets it up: the CA bundle from ConfigMap
// <name>-ca, the Service's name; nil without TLS.
func clusterTLS(g Gomega, cc *cachev1alpha1.CacheCluster) *tls.Config {
	if !cc.Spec.TLS.Enabled {
		return nil
	}
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM([]byte(caBundle(g, cc.Namespace, cc.Name)))).To(BeTrue(), "ConfigMap %s-ca holds a PEM bundle", cc.Name)
	return &tls.Config{RootCAs: pool, ServerName: cc.Name + "." + cc.Namespace + ".svc", MinVersion: tls.VersionTLS12}
}

// caBundle is ConfigMap <name>-ca's ca.crt.
func caBundle(g Gomega, ns, cluster string) string {
	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cluster + "-ca"}, cm)).To(Succeed())
	g.Expect(cm.Data["ca.crt"]).NotTo(BeEmpty())
	return cm.Data["ca.crt"]
}

// redisAtTLS is redisAt over TLS when cfg is set.
func redisAtTLS(ip, pw string, cfg *tls.Config) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: ip + ":6379", Password: pw, TLSConfig: cfg, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
}

// servedSerial is the serial of the certificate a pod's server presents
// on a new connection, checked against cfg.
func servedSerial(g Gomega, ip string, cfg *tls.Config) string {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", ip+":6379", cfg)
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
}

// redisCLI runs Debian's redis-cli, as a person would.
func redisCLI(args ...string) (string, error) {
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// examples/tls: TLS only. redis-cli with the clients' CA bundle works and a
// plaintext connection is refused; the master is killed under the
// WAIT-confirmed writer (over TLS) and no acknowledged write is lost; a
// backup streamed over TLS is restored into a new TLS cluster with every
// acknowledged write.
func TestTLS(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-tls")
	target, _ := backupTarget(g, ns, "tls-backups")
	cc := loadExample(t, "tls", ns)
	cc.Spec.HighAvailability.ProbeTimeoutSeconds = 1
	cc.Spec.Backup.S3 = target
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	before := waitReplicating(g, cc)
	g.Expect(before.Status.TLS).NotTo(BeNil())
	g.Expect(before.Status.TLS.Serial).NotTo(BeEmpty())
	g.Expect(before.Status.TLS.NotAfter.Time).To(BeTemporally("~", time.Now().Add(90*24*time.Hour), time.Hour))
	g.Expect(before.Status.TLS.RenewalTime.Time).To(BeTemporally("~", before.Status.TLS.NotAfter.Add(-7*24*time.Hour), time.Second))
	cfg := clusterTLS(g, before)
	pw := password(g, ns, "secure")
	masterIP := pod(g, ns, before.Status.CurrentMaster).Status.PodIP

	// A person with the bundle: redis-cli --tls --cacert.
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	g.Expect(os.WriteFile(caFile, []byte(caBundle(g, ns, "secure")), 0o600)).To(Succeed())
	out, err := redisCLI("--tls", "--cacert", caFile, "-h", masterIP, "-p", "6379", "--no-auth-warning", "-a", pw, "ping")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(Equal("PONG"))
	// Plaintext is refused, by redis-cli and by a Go client.
	out, _ = redisCLI("-h", masterIP, "-p", "6379", "--no-auth-warning", "-a", pw, "ping")
	g.Expect(out).NotTo(ContainSubstring("PONG"), "a plaintext connection must be refused")
	t.Logf("redis-cli without --tls: %q", out)
	plain := redisAt(masterIP, pw)
	g.Expect(plain.Ping(ctx).Err()).To(HaveOccurred(), "a plaintext connection must be refused")
	_ = plain.Close()
	// A CA the cluster does not use is refused by the client.
	other := x509.NewCertPool()
	stranger := redisAtTLS(masterIP, pw, &tls.Config{RootCAs: other, ServerName: cfg.ServerName})
	err = stranger.Ping(ctx).Err()
	_ = stranger.Close()
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("certificate"))
	// Each pod serves the certificate of the Secret, for the Service's
	// name and for its own under the headless Service.
	for _, n := range before.Status.Nodes {
		g.Expect(servedSerial(g, n.Address, cfg)).To(Equal(before.Status.TLS.Serial), n.PodName)
		own := cfg.Clone()
		own.ServerName = n.PodName + ".secure-headless." + ns + ".svc"
		g.Expect(servedSerial(g, n.Address, own)).To(Equal(before.Status.TLS.Serial), n.PodName)
	}
	g.Expect(meta.IsStatusConditionTrue(before.Status.Conditions, cachev1alpha1.ConditionCertificateLoaded)).To(BeTrue())

	// The master dies under the writer.
	masters := watchMasters(t, ns)
	t.Cleanup(masters.stop)
	w := &workload{ns: ns, cluster: "secure", password: pw, tls: cfg, waitMs: 500, acked: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 50))
	old := before.Status.CurrentMaster
	g.Expect(env.KillContainer(ns, old, "redis")).To(Succeed())
	n := w.ackedCount()
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", n+50), "writes resume after the kill")
	after := waitReplicating(g, cc)
	g.Expect(after.Status.CurrentMaster).NotTo(Equal(old), "the killed master was replaced")
	t.Logf("master %s → %s over TLS", old, after.Status.CurrentMaster)
	w.finish(t, g, masters)
	w.mu.Lock()
	t.Logf("writer errors: %v", w.errs)
	w.mu.Unlock()

	// A backup streamed over TLS (SYNC on a TLS connection), once the
	// replicas hold every acknowledged write.
	mc := redisAtTLS(pod(g, ns, after.Status.CurrentMaster).Status.PodIP, pw, cfg)
	defer mc.Close()
	g.Expect(mc.Wait(ctx, 2, 10*time.Second).Val()).To(BeEquivalentTo(2), "both replicas caught up")
	name := backupNow(g, ns, "secure", "--wait=2m")
	cb := getBackup(g, ns, name)
	g.Expect(cb.Status.Phase).To(Equal(cachev1alpha1.BackupCompleted))
	g.Expect(cb.Status.Keys).To(Equal(mc.DBSize(ctx).Val()))
	t.Logf("backup over TLS: %d keys, %d bytes from %s", cb.Status.Keys, cb.Status.Size, cb.Status.SourcePod)

	// Restored into a new TLS cluster, with its own CA and certificate.
	restored := loadExample(t, "tls", ns)
	restored.Name = "secure-restored"
	restored.Spec.Restore = &cachev1alpha1.RestoreSpec{Backup: name}
	g.Expect(k8s.Create(ctx, restored)).To(Succeed())
	got := waitReplicating(g, restored)
	t.Logf("Restored: %s", waitCondition(g, ns, restored.Name, cachev1alpha1.ConditionRestored, metav1.ConditionTrue).Message)
	g.Expect(got.Status.TLS.Serial).NotTo(Equal(after.Status.TLS.Serial))
	copyOf := &workload{ns: ns, cluster: restored.Name, password: password(g, ns, restored.Name), tls: clusterTLS(g, got), acked: w.acked}
	checked, lost := copyOf.Verify(g)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes missing from the restored cluster")
	t.Logf("%d acknowledged writes found in the restored TLS cluster", checked)
	// The restored cluster's bundle does not open the first cluster.
	cross := redisAtTLS(pod(g, ns, after.Status.CurrentMaster).Status.PodIP, pw, clusterTLS(g, got))
	g.Expect(cross.Ping(ctx).Err()).To(HaveOccurred(), "each cluster has a CA of its own")
	_ = cross.Close()

	// TLS cannot be turned off in place.
	err = k8s.Patch(ctx, after, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"tls":{"enabled":false}}}`)))
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("spec.tls.enabled cannot change"))
}

// Certificates that live three minutes and are renewed when they have two
// left: renewed twice, live, under the writer; every pod serves the new
// certificate without a restart and the writer's connection stays.
func TestTLSRenewal(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-tls-renew")
	cc := loadExample(t, "tls", ns)
	cc.Name = "renew"
	cc.Spec.TLS.Duration, cc.Spec.TLS.RenewBefore = "3m", "2m"
	cc.Spec.HighAvailability.ProbeTimeoutSeconds = 1
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	before := waitReplicating(g, cc)
	first := before.Status.TLS.Serial
	cfg := clusterTLS(g, before)
	started := map[string]metav1.Time{}
	for _, n := range before.Status.Nodes {
		p := pod(g, ns, n.PodName)
		g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
		g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
		g.Expect(p.Status.ContainerStatuses[0].State.Running).NotTo(BeNil())
		started[n.PodName] = p.Status.ContainerStatuses[0].State.Running.StartedAt
	}

	masters := watchMasters(t, ns)
	t.Cleanup(masters.stop)
	// An application keeps its connection while it works.
	w := &workload{ns: ns, cluster: "renew", password: password(g, ns, "renew"), tls: cfg, sticky: true, waitMs: 500, acked: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	g.Eventually(w.ackedCount, limits.PodRestart, limits.Poll).Should(BeNumerically(">", 50))

	// Two renewals: status.tls.serial changes twice, and after each every
	// pod serves the new certificate.
	serials := []string{first}
	renewedAt := []time.Time{}
	for len(serials) < 3 {
		g.Eventually(func(g Gomega) {
			got := getCC(g, cc)
			g.Expect(got.Status.TLS.Serial).NotTo(Equal(serials[len(serials)-1]))
			serials = append(serials, got.Status.TLS.Serial)
			renewedAt = append(renewedAt, time.Now())
		}, 3*time.Minute, time.Second).Should(Succeed(), "the certificate is renewed")
		want := serials[len(serials)-1]
		g.Eventually(func(g Gomega) {
			got := getCC(g, cc)
			c := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionCertificateLoaded)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(c.Message).To(ContainSubstring(want))
			for _, n := range got.Status.Nodes {
				g.Expect(servedSerial(g, n.Address, cfg)).To(Equal(want), n.PodName)
			}
		}, limits.PodRestart, time.Second).Should(Succeed(), "every pod serves the renewed certificate %s", want)
		t.Logf("renewed to %s; every pod serves it %s after the Secret changed", want, time.Since(renewedAt[len(renewedAt)-1]).Round(time.Second))
	}
	w.finish(t, g, masters)
	w.mu.Lock()
	failures, errs := w.failures, w.errs
	w.mu.Unlock()
	t.Logf("writer: %d failed writes: %v", failures, errs)
	for e := range errs {
		g.Expect(strings.ToLower(e)).NotTo(Or(ContainSubstring("tls"), ContainSubstring("certificate"), ContainSubstring("x509")), "a TLS error reached the client")
	}
	g.Expect(failures).To(BeNumerically("<=", 1), "the writer's connection outlives the renewals (at most one reconnect)")

	// No pod restarted for it.
	for name, at := range started {
		p := pod(g, ns, name)
		g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero(), name)
		g.Expect(p.Status.ContainerStatuses[0].State.Running.StartedAt.Time).To(BeTemporally("==", at.Time), name)
	}
	reasons := eventsByReason(g, ns)
	g.Expect(len(reasons[cachev1alpha1.EventCertificateIssued])).To(BeNumerically(">=", 1))
	g.Expect(reasons).To(HaveKey(cachev1alpha1.EventCertificateLoaded))
}

// A sharded cluster with TLS: the bus and MIGRATE speak TLS (tls-cluster),
// the operator forms it over TLS, a cluster-aware client that follows
// MOVED to addresses (checking the Service's name) writes and reads every
// slot, and a killed shard master is replaced by its replica's election
// over the TLS bus with every written key still there.
func TestShardedTLS(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "e2e-sharded-tls")
	cc := loadExample(t, "sharded", ns)
	cc.Spec.TLS.Enabled = true
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	got := waitShardsServing(g, cc)
	cluster := clusterClient(g, cc)
	defer cluster.Close()
	const keys = 1000
	for i := range keys {
		key := fmt.Sprintf("k:%d", i)
		g.Expect(cluster.Set(ctx, key, "v"+key, 0).Err()).To(Succeed())
	}
	pw := password(g, ns, "sharded")
	cfg := clusterTLS(g, got)
	master := got.Status.Shards[0].Master
	mc := redisAtTLS(pod(g, ns, master).Status.PodIP, pw, cfg)
	g.Expect(mc.Do(ctx, "WAIT", 1, 5000).Val()).To(BeEquivalentTo(1))
	_ = mc.Close()
	plain := redisAt(pod(g, ns, master).Status.PodIP, pw)
	g.Expect(plain.Ping(ctx).Err()).To(HaveOccurred(), "a plaintext connection must be refused")
	_ = plain.Close()

	// Frozen, not killed: a killed container is restarted by the kubelet
	// sooner than cluster-node-timeout and stays its shard's master.
	g.Expect(env.Freeze(ns, master, "redis")).To(Succeed())
	g.Eventually(func(g Gomega) {
		now := getCC(g, cc)
		g.Expect(now.Status.Shards).NotTo(BeEmpty())
		g.Expect(now.Status.Shards[0].Master).NotTo(Equal(master))
	}, limits.PodRestart, limits.Poll).Should(Succeed(), "shard 0's replica takes over")
	g.Expect(env.Thaw(ns, master, "redis")).To(Succeed())
	after := waitShardsServing(g, cc)
	t.Logf("shard 0: %s → %s over the TLS bus", master, after.Status.Shards[0].Master)
	reader := clusterClient(g, cc)
	defer reader.Close()
	g.Eventually(func(g Gomega) {
		for i := range keys {
			key := fmt.Sprintf("k:%d", i)
			g.Expect(reader.Get(ctx, key).Val()).To(Equal("v"+key), key)
		}
	}, limits.PodRestart, time.Second).Should(Succeed())
}
