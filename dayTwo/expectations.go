package daytwo

import (
	"context"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// expectationTTL bounds how long a reconcile waits for the cache to show a
// write of ours; past it, the cache is trusted again (a write that was
// undone meanwhile would otherwise block the cluster for good).
const expectationTTL = 15 * time.Second

// expectationRecheck: how soon to look again while the cache is behind
// (a watch event of the awaited object wakes the reconcile earlier).
const expectationRecheck = 50 * time.Millisecond

// expectations remember the writes whose effect the cache has not shown
// yet, as the ReplicaSet controller keeps them: until it has, the cluster
// is not planned again, so a step is never taken twice on what the cache
// showed before it. Measured before this existed: after the API server
// came back from a restart, the same pod label was patched 173 times in
// about 3 s while the pod cache caught up.
type expectations struct {
	mu        sync.Mutex
	byCluster map[types.NamespacedName]*clusterExpectations
}

type clusterExpectations struct {
	// status is the resourceVersion of our last status write.
	status uint64
	pods   map[string]podExpectation
}

// podExpectation: the cache must show the pod at resourceVersion rv or
// later, or (gone set) show that pod deleted, deleting, or replaced.
type podExpectation struct {
	rv    uint64
	gone  types.UID
	since time.Time
}

func (e *expectations) cluster(key types.NamespacedName) *clusterExpectations {
	if e.byCluster == nil {
		e.byCluster = map[types.NamespacedName]*clusterExpectations{}
	}
	c := e.byCluster[key]
	if c == nil {
		c = &clusterExpectations{pods: map[string]podExpectation{}}
		e.byCluster[key] = c
	}
	return c
}

// wroteStatus expects the cluster at the resourceVersion our status patch
// returned.
func (e *expectations) wroteStatus(cc *cachev1alpha1.CacheCluster) {
	rv, ok := parseRV(cc.ResourceVersion)
	if !ok {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cluster(client.ObjectKeyFromObject(cc)).status = rv
}

// wrotePod expects a pod at the resourceVersion a patch of ours returned.
func (e *expectations) wrotePod(key types.NamespacedName, pod *corev1.Pod, now time.Time) {
	rv, ok := parseRV(pod.ResourceVersion)
	if !ok {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cluster(key).pods[pod.Name] = podExpectation{rv: rv, since: now}
}

// deletedPod expects the pod with this UID to be gone or deleting.
func (e *expectations) deletedPod(key types.NamespacedName, name string, uid types.UID, now time.Time) {
	if uid == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cluster(key).pods[name] = podExpectation{gone: uid, since: now}
}

// pending returns what the cache does not show yet of our writes to this
// cluster and its pods (empty when it shows everything), dropping what it
// shows and what waited longer than expectationTTL.
func (e *expectations) pending(cc *cachev1alpha1.CacheCluster, pods []corev1.Pod, now time.Time) string {
	key := client.ObjectKeyFromObject(cc)
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.byCluster[key]
	if c == nil {
		return ""
	}
	var waiting string
	if c.status != 0 {
		if rv, ok := parseRV(cc.ResourceVersion); !ok || rv >= c.status {
			c.status = 0
		} else {
			waiting = "our status write"
		}
	}
	cached := map[string]*corev1.Pod{}
	for i := range pods {
		cached[pods[i].Name] = &pods[i]
	}
	for name, want := range c.pods {
		if want.shownIn(cached[name]) || now.Sub(want.since) > expectationTTL {
			delete(c.pods, name)
			continue
		}
		if waiting == "" {
			waiting = "our write to pod " + name
		}
	}
	return waiting
}

func (want podExpectation) shownIn(p *corev1.Pod) bool {
	if p == nil {
		return true
	}
	if want.gone != "" {
		return p.UID != want.gone || !p.DeletionTimestamp.IsZero()
	}
	rv, ok := parseRV(p.ResourceVersion)
	return !ok || rv >= want.rv
}

func (e *expectations) forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byCluster, key)
}

// parseRV reads a resourceVersion. They are opaque to clients, but etcd's
// are increasing integers; anything else is never waited for.
func parseRV(s string) (uint64, bool) {
	rv, err := strconv.ParseUint(s, 10, 64)
	return rv, err == nil
}

// awaitExpectations ends the reconcile while the cache does not show a
// write of ours yet: a step planned on what it showed before could be the
// one just taken.
func (r *Reconciler) awaitExpectations(ctx context.Context, s *scope) error {
	if what := r.expect.pending(s.cc, s.pods, r.now()); what != "" {
		ctrl.LoggerFrom(ctx).V(1).Info("Waiting for the cache to show " + what)
		s.stop(ctrl.Result{RequeueAfter: expectationRecheck})
	}
	return nil
}
