package daytwo_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// The day-two controller against a real API server and real redis-server
// processes: each test asserts on what Redis reports (INFO replication,
// the keys) and on what the cluster's status and pod labels say. Every
// test has its own namespace and loopback /24 (127.0.<subnet>.0).

func without(pods []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(pods), func(p string) bool { return p == name })
}

func (c *cluster) mergePatch(obj client.Object, patch string) {
	c.t.Helper()
	must(c.t, k8s.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(patch))))
}

// Three pods that answer and no status: one becomes master, in the status,
// in Redis and in its label; the other two replicate from it.
func TestIntegrationBootstrap(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{subnet: 20, pods: 3})
	g := NewWithT(t)
	master := c.waitReplicating(g)
	g.Eventually(func(g Gomega) {
		g.Expect(c.events(g)[cachev1alpha1.EventMasterElected]).To(ContainElement(ContainSubstring(master)))
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
}

// The master's redis-server is killed under acknowledged writes: a replica
// takes over with every acknowledged write, and the old master, started
// again on its data, follows the new one.
func TestIntegrationFailover(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{subnet: 21, pods: 3})
	g := NewWithT(t)
	old := c.waitReplicating(g)
	labels := c.watchMasterLabels()
	w := c.startWriter()
	w.waitAcked(g, 200)

	c.redis[old].kill()
	var master string
	g.Eventually(func(g Gomega) {
		master = c.get(g).Status.CurrentMaster
		g.Expect(master).NotTo(Or(BeEmpty(), Equal(old)), "status.currentMaster")
		c.expectReplicating(g, master, without(c.pods, old))
		g.Expect(c.roleLabels(g)[old]).NotTo(Equal(cachev1alpha1.RoleMaster), old)
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.events(g)[cachev1alpha1.EventFailoverCompleted]).To(ContainElement(ContainSubstring(fmt.Sprintf("%s→%s", old, master))))
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	w.waitAcked(g, 50)

	// The old master comes back on its own data (its AOF): it is fenced,
	// follows the new master, and the master stays where it is.
	c.redis[old].start(t)
	g.Eventually(func(g Gomega) { c.expectReplicating(g, master, c.pods) }).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	w.waitAcked(g, 50)
	checked, lost := w.lostOn(g, master)
	t.Logf("failover %s→%s; %d acknowledged writes checked on %s", old, master, checked, master)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	g.Expect(labels.Max()).To(Equal(1), "two pods carried the master label at once")
}

// A replica made master by hand is made a replica of the recorded master
// again, which stays master, and the clients connected to it are dropped
// (they would write to a replica otherwise).
func TestIntegrationFencing(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{subnet: 22, pods: 3})
	g := NewWithT(t)
	ctx := context.Background()
	master := c.waitReplicating(g)
	rogue := without(c.pods, master)[0]
	app := redisAt(c.ips[rogue], c.password)
	defer app.Close()
	id, err := app.ClientID(ctx).Result()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(app.Do(ctx, "REPLICAOF", "NO", "ONE").Err()).To(Succeed())
	g.Eventually(func(g Gomega) {
		c.expectReplicating(g, master, c.pods)
		rc := redisAt(c.ips[rogue], c.password)
		defer rc.Close()
		list, err := rc.ClientList(ctx).Result()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list).NotTo(ContainSubstring(fmt.Sprintf("id=%d ", id)), "the client of the rogue master is dropped")
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
}

// The switchover annotation moves the master to the named pod, losing no
// acknowledged write, and is removed once served.
func TestIntegrationSwitchover(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{subnet: 23, pods: 3})
	g := NewWithT(t)
	old := c.waitReplicating(g)
	target := without(c.pods, old)[1]
	labels := c.watchMasterLabels()
	w := c.startWriter()
	w.waitAcked(g, 200)

	c.mergePatch(&cachev1alpha1.CacheCluster{ObjectMeta: c.get(g).ObjectMeta},
		fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, cachev1alpha1.AnnotationSwitchoverTo, target))
	g.Eventually(func(g Gomega) {
		g.Expect(c.get(g).Annotations).NotTo(HaveKey(cachev1alpha1.AnnotationSwitchoverTo))
		c.expectReplicating(g, target, c.pods)
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.events(g)[cachev1alpha1.EventSwitchover]).To(ContainElement(ContainSubstring(target + " is the master (was " + old + ")")))
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	w.waitAcked(g, 50)
	checked, lost := w.lostOn(g, target)
	t.Logf("switchover %s→%s; %d acknowledged writes checked on %s", old, target, checked, target)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	g.Expect(labels.Max()).To(Equal(1), "two pods carried the master label at once")
}

// statusRecord is the part of one CacheCluster version a scale-down's
// order is judged on.
type statusRecord struct {
	Master   string
	Replicas int32 // status.rollout.replicas; 0 before the first approval
	Op       string
}

// A scale-down below the master's ordinal moves the master first; the
// smaller count reaches status.rollout (which day-one renders into the
// StatefulSet) only then.
func TestIntegrationScaleDownMovesTheMasterFirst(t *testing.T) {
	t.Parallel()
	// cache-2 alone holds data before the cluster exists: bootstrap makes
	// it the master, on the ordinal a scale to 2 removes.
	c := newCluster(t, clusterOpts{subnet: 24, pods: 3, beforeCreate: func(c *cluster) {
		rc := redisAt(c.ips["cache-2"], c.password)
		defer rc.Close()
		must(c.t, rc.Set(context.Background(), "seed", "1", 0).Err())
	}})
	g := NewWithT(t)
	old := c.waitReplicating(g)
	g.Expect(old).To(Equal("cache-2"), "bootstrap chooses the pod with data")

	var mu sync.Mutex
	var history []statusRecord
	c.watch(&cachev1alpha1.CacheClusterList{}, func(_ watch.EventType, o client.Object) {
		cc := o.(*cachev1alpha1.CacheCluster)
		r := statusRecord{Master: cc.Status.CurrentMaster}
		if ro := cc.Status.Rollout; ro != nil {
			r.Replicas = ro.Replicas
		}
		if op := cc.Status.Operation; op != nil {
			r.Op = string(op.Type) + "/" + op.Step
		}
		mu.Lock()
		history = append(history, r)
		mu.Unlock()
	})
	w := c.startWriter()
	w.waitAcked(g, 100)

	c.mergePatch(&cachev1alpha1.CacheCluster{ObjectMeta: c.get(g).ObjectMeta}, `{"spec":{"replicas":2}}`)
	g.Eventually(func(g Gomega) {
		ro := c.get(g).Status.Rollout
		g.Expect(ro).NotTo(BeNil())
		g.Expect(ro.Replicas).To(Equal(int32(2)), "status.rollout.replicas")
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	// When the smaller count is approved, the pod that goes is no master
	// in Redis any more.
	g.Expect(c.info(g, old)["role"]).To(Equal("slave"), old)

	// Day-one's part: the StatefulSet takes the count, its controller
	// removes the last pod.
	sts := &appsv1.StatefulSet{}
	must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: c.name}, sts))
	sts.Spec.Replicas = ptr.To(int32(2))
	must(t, k8s.Update(context.Background(), sts))
	c.settleStatefulSet()
	must(t, k8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: metaOf(c.ns, old)}))
	c.redis[old].kill()

	remaining := without(c.pods, old)
	var master string
	g.Eventually(func(g Gomega) {
		master = c.get(g).Status.CurrentMaster
		c.expectReplicating(g, master, remaining)
	}).WithTimeout(deadline).WithPolling(poll).Should(Succeed())
	w.waitAcked(g, 50)
	_, lost := w.lostOn(g, master)
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")

	mu.Lock()
	defer mu.Unlock()
	t.Logf("status history: %v", history)
	moved := slices.IndexFunc(history, func(r statusRecord) bool { return r.Master != "" && r.Master != old })
	shrunk := slices.IndexFunc(history, func(r statusRecord) bool { return r.Replicas == 2 })
	g.Expect(moved).To(BeNumerically(">=", 0), "the master moved")
	g.Expect(shrunk).To(BeNumerically(">", moved), "status.rollout.replicas shrank only after the master moved")
	for _, r := range history {
		if r.Replicas == 2 {
			g.Expect(r.Master).NotTo(Equal(old), "a version of the status approves 2 pods with the master on ordinal 2")
		}
	}
	g.Expect(history).To(ContainElement(HaveField("Op", string(cachev1alpha1.OperationScaling)+"/"+cachev1alpha1.StepSwitchover)), "the scale-down ran a switchover")
}
