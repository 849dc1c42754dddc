package daytwo

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// What the cache must show before a cluster is planned again, and how
// long that is waited for.
func TestExpectations(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cc := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: "10"}}
	key := types.NamespacedName{Namespace: "ns", Name: "c"}
	pod := func(name, rv string, uid types.UID) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, UID: uid}}
	}
	var e expectations
	if got := e.pending(cc, nil, now); got != "" {
		t.Fatalf("nothing written, yet waiting for %s", got)
	}

	e.wrotePod(key, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-1", ResourceVersion: "20"}}, now)
	if got := e.pending(cc, []corev1.Pod{pod("c-1", "19", "u1")}, now); got == "" {
		t.Fatal("a pod cached at an older resourceVersion than our patch must be waited for")
	}
	if got := e.pending(cc, []corev1.Pod{pod("c-1", "19", "u1")}, now.Add(expectationTTL+time.Second)); got != "" {
		t.Fatalf("past the TTL the cache is trusted again, yet waiting for %s", got)
	}

	e.wrotePod(key, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-1", ResourceVersion: "20"}}, now)
	if got := e.pending(cc, []corev1.Pod{pod("c-1", "21", "u1")}, now); got != "" {
		t.Fatalf("the cache shows the patch, yet waiting for %s", got)
	}

	e.deletedPod(key, "c-2", "u2", now)
	if got := e.pending(cc, []corev1.Pod{pod("c-2", "30", "u2")}, now); got == "" {
		t.Fatal("a deleted pod still cached as it was must be waited for")
	}
	if got := e.pending(cc, []corev1.Pod{pod("c-2", "31", "u3")}, now); got != "" {
		t.Fatalf("a replacement pod shows the deletion, yet waiting for %s", got)
	}

	written := cc.DeepCopy()
	written.ResourceVersion = "40"
	e.wroteStatus(written)
	if got := e.pending(cc, nil, now); got != "our status write" {
		t.Fatalf("pending = %q, want our status write", got)
	}
	cc.ResourceVersion = "40"
	if got := e.pending(cc, nil, now); got != "" {
		t.Fatalf("the cache shows the status write, yet waiting for %s", got)
	}
}
