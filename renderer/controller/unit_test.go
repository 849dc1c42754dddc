package controller

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

// Plain `kubectl apply` stores the whole object in an annotation limited to
// 256 KiB; the CRD must fit.
func TestCRDFitsPlainKubectlApply(t *testing.T) {
	g := NewWithT(t)
	info, err := os.Stat(filepath.Join(repoRoot(), "charts", "cacheops", "crds", "cache.cacheops.io_cacheclusters.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("CRD size: %.1f KiB", float64(info.Size())/1024)
	g.Expect(info.Size()).To(BeNumerically("<", 256*1024))
}

// Every kind the chart can render must be pruned and deleted with the
// cluster; a template of a new kind without a ManagedKinds entry fails here.
func TestManagedKindsCoverEveryRenderedKind(t *testing.T) {
	g := NewWithT(t)
	known := map[string]bool{}
	for _, gvk := range ManagedKinds {
		known[gvk.GroupVersion().String()+"/"+gvk.Kind] = true
	}
	for _, name := range []string{"basic", "production", "single"} {
		cc := loadExample(t, name, "ns")
		objs, err := renderer.Render(cc, renderer.DefaultCapabilities())
		g.Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			g.Expect(known).To(HaveKey(o.GetAPIVersion()+"/"+o.GetKind()), "%s renders %s", name, o.GetKind())
		}
	}
}

func TestStatefulSetHealth(t *testing.T) {
	tests := []struct {
		name  string
		given appsv1.StatefulSetStatus
		want  status.Status
	}{
		{"not observed", appsv1.StatefulSetStatus{ObservedGeneration: 1}, status.InProgressStatus},
		{"pods missing", appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 2, ReadyReplicas: 2}, status.InProgressStatus},
		{"not ready", appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 2}, status.InProgressStatus},
		{"extra pods", appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 4, ReadyReplicas: 4}, status.InProgressStatus},
		{"outdated pods", appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, UpdatedReplicas: 1, CurrentRevision: "a", UpdateRevision: "b"}, status.InProgressStatus},
		{"all current", appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, UpdatedReplicas: 3, CurrentRevision: "a", UpdateRevision: "a"}, status.CurrentStatus},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}, Status: tt.given}
			got, msg := statefulSetHealth(sts)
			NewWithT(t).Expect(got).To(Equal(tt.want), msg)
		})
	}
}

func TestSummarizeKeepsReconcilingAndStalledOnlyWhileTrue(t *testing.T) {
	g := NewWithT(t)
	cc := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	summarize(&scope{cc: cc, stalled: &stall{reason: "RenderFailed", message: "bad"}}, nil)
	g.Expect(cc.Status.Phase).To(Equal(cachev1alpha1.PhaseFailed))
	g.Expect(condition(cc, cachev1alpha1.ConditionStalled).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(condition(cc, cachev1alpha1.ConditionReconciling)).To(BeNil())

	sts := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}, Status: appsv1.StatefulSetStatus{Replicas: 3, ReadyReplicas: 3}}
	summarize(&scope{cc: cc, statefulSet: sts, children: []childHealth{{kind: "StatefulSet", status: status.CurrentStatus}}}, nil)
	g.Expect(cc.Status.Phase).To(Equal(cachev1alpha1.PhaseRunning))
	g.Expect(condition(cc, cachev1alpha1.ConditionStalled)).To(BeNil())
	g.Expect(condition(cc, cachev1alpha1.ConditionReconciling)).To(BeNil())
	g.Expect(condition(cc, cachev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))

	// Pods lost after the cluster ran: Degraded, not Initializing.
	sts.Status.ReadyReplicas = 1
	summarize(&scope{cc: cc, statefulSet: sts, children: []childHealth{{kind: "StatefulSet", status: status.InProgressStatus, message: "1 of 3 pods are ready"}}}, nil)
	g.Expect(cc.Status.Phase).To(Equal(cachev1alpha1.PhaseDegraded))
	g.Expect(condition(cc, cachev1alpha1.ConditionDegraded).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(condition(cc, cachev1alpha1.ConditionAvailable).Status).To(Equal(metav1.ConditionTrue))

	// More than half down, and for longer than MajorityDownAfter: Failed.
	degradedAt := condition(cc, cachev1alpha1.ConditionDegraded).LastTransitionTime.Time
	summarize(&scope{cc: cc, now: degradedAt.Add(MajorityDownAfter / 2), statefulSet: sts, children: []childHealth{{kind: "StatefulSet", status: status.InProgressStatus, message: "1 of 3 pods are ready"}}}, nil)
	g.Expect(cc.Status.Phase).To(Equal(cachev1alpha1.PhaseDegraded), "not yet")
	summarize(&scope{cc: cc, now: degradedAt.Add(2 * MajorityDownAfter), statefulSet: sts, children: []childHealth{{kind: "StatefulSet", status: status.InProgressStatus, message: "1 of 3 pods are ready"}}}, nil)
	g.Expect(cc.Status.Phase).To(Equal(cachev1alpha1.PhaseFailed))
	g.Expect(condition(cc, cachev1alpha1.ConditionDegraded).Reason).To(Equal(cachev1alpha1.ReasonMajorityDown))
	g.Expect(condition(cc, cachev1alpha1.ConditionReady).Message).To(ContainSubstring("2 of 3 pods have been down"))

	// Pods back: Running again.
	sts.Status.ReadyReplicas = 3
	summarize(&scope{cc: cc, now: degradedAt.Add(3 * MajorityDownAfter), statefulSet: sts, children: []childHealth{{kind: "StatefulSet", status: status.CurrentStatus}}}, nil)
	g.Expect(cc.Status.Phase).To(Equal(cachev1alpha1.PhaseRunning))
}

func TestIsSubset(t *testing.T) {
	tests := []struct {
		name      string
		want, got any
		wantOK    bool
	}{
		{"extra keys in live", map[string]any{"a": int64(1)}, map[string]any{"a": int64(1), "b": "x"}, true},
		{"changed value", map[string]any{"a": int64(1)}, map[string]any{"a": int64(2)}, false},
		{"missing key", map[string]any{"a": "x"}, map[string]any{}, false},
		{"empty map we render, absent live", map[string]any{"a": map[string]any{}}, map[string]any{}, true},
		{"float and int", map[string]any{"a": float64(3)}, map[string]any{"a": int64(3)}, true},
		{"list order matters", []any{"a", "b"}, []any{"b", "a"}, false},
		{"list length matters", []any{"a"}, []any{"a", "b"}, false},
		{"list elements are subsets", []any{map[string]any{"p": int64(1)}}, []any{map[string]any{"p": int64(1), "protocol": "TCP"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(isSubset(tt.want, tt.got, "")).To(Equal(tt.wantOK))
		})
	}
}

func TestEventNotesFitAnEvent(t *testing.T) {
	g := NewWithT(t)
	g.Expect(boundNote("short")).To(Equal("short"))
	long := strings.Repeat("é", 600) // 1200 bytes
	got := boundNote(long)
	g.Expect(len(got)).To(BeNumerically("<=", maxEventNote))
	g.Expect(utf8.ValidString(got)).To(BeTrue())
	g.Expect(got).To(HaveSuffix(" …"))
}

// TestKnownVersionsReadWhatChanged: a child is read whole from the API
// server when it changed since day-one last knew it (any new
// resourceVersion, a write that only removed fields included), or, when
// first seen, when someone else wrote it at or after day-one's apply;
// never when nothing changed.
func TestKnownVersionsReadWhatChanged(t *testing.T) {
	at := func(sec int) *metav1.Time {
		tm := metav1.NewTime(time.Date(2026, 12, 3, 12, 0, sec, 0, time.UTC))
		return &tm
	}
	ours := metav1.ManagedFieldsEntry{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, Time: at(10)}
	obj := func(uid, rv string, entries ...metav1.ManagedFieldsEntry) *corev1.Service {
		s := &corev1.Service{}
		s.UID, s.ResourceVersion, s.ManagedFields = types.UID(uid), rv, entries
		return s
	}
	for _, c := range []struct {
		name string
		live *corev1.Service
		want bool
	}{
		{"only day-one applied it", obj("a", "1", ours), false},
		{"the auth Secret's creator before day-one's apply", obj("b", "1", metav1.ManagedFieldsEntry{Manager: AuthFieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Time: at(10)}, ours), false},
		{"someone edited it after", obj("c", "1", ours, metav1.ManagedFieldsEntry{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(11)}), true},
		{"someone edited it in the same second", obj("d", "1", ours, metav1.ManagedFieldsEntry{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(10)}), true},
		{"someone wrote it before day-one's last apply", obj("e", "1", metav1.ManagedFieldsEntry{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(9)}, ours), false},
		{"day-one never applied it", obj("f", "1", metav1.ManagedFieldsEntry{Manager: "helm", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(1)}), true},
		{"no managedFields", obj("g", "1"), true},
	} {
		var known knownVersions
		if got := known.needsReading(c.live); got != c.want {
			t.Errorf("%s: first sight needsReading = %v, want %v", c.name, got, c.want)
		}
	}

	var known knownVersions
	live := obj("x", "1", ours)
	if known.needsReading(live) {
		t.Fatal("first sight of an object only day-one wrote")
	}
	if known.needsReading(live) {
		t.Error("the same version again")
	}
	// A write that removed a field: no entry of its own, a new version.
	removed := obj("x", "2", ours)
	if !known.needsReading(removed) {
		t.Error("a new version of a known object must be read")
	}
	if !known.needsReading(removed) {
		t.Error("until it was read and found to hold the rendering")
	}
	known.add(removed)
	if known.needsReading(removed) {
		t.Error("a version read and found to hold the rendering")
	}
	// Day-one applies it: judged afresh when seen.
	known.forget("x")
	if known.needsReading(obj("x", "3", ours)) {
		t.Error("day-one's own new version, first seen")
	}
}
