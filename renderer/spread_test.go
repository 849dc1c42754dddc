package renderer

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// The StatefulSet spreads its pods over nodes (anti-affinity by hostname)
// and zones (a topology spread constraint), softly by default and strictly
// with spread: required; the selector of both is the cluster's own pods.
func TestRenderSpread(t *testing.T) {
	own := &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "cachecluster", cachev1alpha1.LabelCluster: "basic"}}
	hostTerm := corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: own}
	tests := []struct {
		name       string
		spread     cachev1alpha1.SpreadMode
		wantAnti   *corev1.PodAntiAffinity
		wantUnsati corev1.UnsatisfiableConstraintAction
	}{
		{"unset: preferred", "", &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: hostTerm}},
		}, corev1.ScheduleAnyway},
		{"preferred", cachev1alpha1.SpreadPreferred, &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: hostTerm}},
		}, corev1.ScheduleAnyway},
		{"required", cachev1alpha1.SpreadRequired, &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{hostTerm},
		}, corev1.DoNotSchedule},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cc := loadExamples(t)["basic"]
			cc.Spec.Scheduling.Spread = tt.spread
			objs, err := Render(cc, DefaultCapabilities())
			g.Expect(err).NotTo(HaveOccurred())
			sts := &appsv1.StatefulSet{}
			for _, o := range objs {
				if o.GetKind() == "StatefulSet" && o.GetName() == "basic" {
					g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, sts, true)).To(Succeed())
				}
			}
			spec := sts.Spec.Template.Spec
			g.Expect(spec.Affinity).To(Equal(&corev1.Affinity{PodAntiAffinity: tt.wantAnti}))
			g.Expect(spec.TopologySpreadConstraints).To(Equal([]corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: tt.wantUnsati, LabelSelector: own,
			}}))
			// The selector picks the pods of this StatefulSet.
			g.Expect(sts.Spec.Template.Labels).To(HaveKeyWithValue(cachev1alpha1.LabelCluster, "basic"))
			g.Expect(sts.Spec.Template.Labels).To(HaveKeyWithValue("app.kubernetes.io/name", "cachecluster"))
		})
	}
}
