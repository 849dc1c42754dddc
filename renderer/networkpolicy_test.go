package renderer

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// renderedNetworkPolicy renders cc and returns its NetworkPolicy.
func renderedNetworkPolicy(g Gomega, cc *cachev1alpha1.CacheCluster) *networkingv1.NetworkPolicy {
	objs, err := Render(cc, DefaultCapabilities())
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		if o.GetKind() == "NetworkPolicy" && o.GetName() == cc.Name {
			np := &networkingv1.NetworkPolicy{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, np, true)).To(Succeed())
			return np
		}
	}
	g.Expect("a NetworkPolicy").To(BeEmpty(), "not rendered")
	return nil
}

var redisPort = []networkingv1.NetworkPolicyPort{{Port: ptrIntOrString(6379), Protocol: ptrProtocol("TCP")}}

// The NetworkPolicy admits the cluster's own pods on every port, the
// operator and the named clients on the Redis port, and nothing else.
func TestNetworkPolicyAdmits(t *testing.T) {
	own := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
		"app.kubernetes.io/name": "cachecluster", cachev1alpha1.LabelCluster: "basic"}}}
	operator := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "ops"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "op"}},
	}
	web := cachev1alpha1.ClientSelector{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	teamA := cachev1alpha1.ClientSelector{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
		PodSelector:       &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"api"}}}},
	}
	tests := []struct {
		name        string
		clients     []cachev1alpha1.ClientSelector
		wantClients []networkingv1.NetworkPolicyPeer
	}{
		{"unset: the cluster's namespace", nil, []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}},
		{"named clients only", []cachev1alpha1.ClientSelector{web, teamA}, []networkingv1.NetworkPolicyPeer{
			{PodSelector: web.PodSelector}, {NamespaceSelector: teamA.NamespaceSelector, PodSelector: teamA.PodSelector}}},
	}
	saved := Operator
	t.Cleanup(func() { Operator = saved })
	Operator = OperatorIdentity{Namespace: "ops", PodLabels: map[string]string{"app": "op"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cc := loadExamples(t)["basic"]
			cc.Spec.Network.AllowedClients = tt.clients
			np := renderedNetworkPolicy(g, cc)
			g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))
			g.Expect(np.Spec.PodSelector.MatchLabels).To(Equal(own.PodSelector.MatchLabels))
			g.Expect(np.Spec.Ingress).To(Equal([]networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{own}},
				{From: []networkingv1.NetworkPolicyPeer{operator}, Ports: redisPort},
				{From: tt.wantClients, Ports: redisPort},
			}))
		})
	}
}

// A sharded cluster's own pods reach each other on every port, the bus
// port 16379 among them; clients reach only 6379.
func TestNetworkPolicyShardedBusIsForTheClusterOnly(t *testing.T) {
	g := NewWithT(t)
	np := renderedNetworkPolicy(g, loadExamples(t)["sharded"])
	g.Expect(np.Spec.Ingress).To(HaveLen(3))
	g.Expect(np.Spec.Ingress[0].Ports).To(BeEmpty(), "the cluster's own pods: every port")
	for _, rule := range np.Spec.Ingress[1:] {
		g.Expect(rule.Ports).To(Equal(redisPort))
	}
}

// A selector the CRD cannot check stalls the cluster with a message.
func TestNetworkPolicyRefusesABadSelector(t *testing.T) {
	g := NewWithT(t)
	cc := loadExamples(t)["basic"]
	cc.Spec.Network.AllowedClients = []cachev1alpha1.ClientSelector{{PodSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}}}
	_, err := Render(cc, DefaultCapabilities())
	g.Expect(err).To(MatchError(ContainSubstring(`spec.network.allowedClients[0].podSelector: "Near" is not a valid label selector operator`)))
}

func ptrIntOrString(port int) *intstr.IntOrString {
	v := intstr.FromInt32(int32(port))
	return &v
}

func ptrProtocol(p corev1.Protocol) *corev1.Protocol { return &p }
