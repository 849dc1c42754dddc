package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// TestTheCacheHoldsNoManagedFields: the API server keeps managedFields
// with their field sets; the manager's cache drops them from the
// CacheCluster and keeps of its children only who wrote the object itself
// and when (day-one's drift check), and a Secret the operator does not
// own is not in the cache at all.
func TestTheCacheHoldsNoManagedFields(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cc := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	foreign := &corev1.Secret{}
	foreign.Namespace, foreign.Name = ns, "someone-elses"
	g.Expect(k8s.Create(ctx, foreign)).To(Succeed())

	key := client.ObjectKey{Namespace: ns, Name: "basic"}
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.GetManagedFields()).NotTo(BeEmpty(), "the API server's copy")
		g.Expect(mgrCache.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.GetManagedFields()).To(BeEmpty(), "the cached CacheCluster")
	}, timeout, interval).Should(Succeed())
	for _, obj := range []client.Object{&appsv1.StatefulSet{}, &corev1.Service{}, &corev1.Secret{}} {
		key := key
		if _, ok := obj.(*corev1.Secret); ok {
			key.Name = "basic-auth"
		}
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, key, obj)).To(Succeed())
			g.Expect(obj.GetManagedFields()).NotTo(BeEmpty(), "the API server's copy of %T", obj)
			g.Expect(mgrCache.Get(ctx, key, obj)).To(Succeed())
			g.Expect(obj.GetManagedFields()).NotTo(BeEmpty(), "the cached %T says who applied it", obj)
			for _, e := range obj.GetManagedFields() {
				g.Expect(e.FieldsV1).To(BeNil(), "the cached %T holds no field sets", obj)
				g.Expect(e.Subresource).To(BeEmpty(), "the cached %T holds no status writes", obj)
				g.Expect(e.Time).NotTo(BeNil())
			}
		}, timeout, interval).Should(Succeed())
	}
	list := &corev1.SecretList{}
	g.Expect(mgrCache.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	for _, s := range list.Items {
		g.Expect(s.Name).NotTo(Equal(foreign.Name), "a Secret cacheops does not own is not cached")
	}
}

// TestTheCacheKeepsOnlyWhatIsReadOfTheChildren: cached StatefulSets keep
// the replicas, the selector and of the template its annotations and the
// containers' names, images and resources; Services their type and
// cluster IP; NetworkPolicies and PodDisruptionBudgets no spec. Their
// status stays (health).
func TestTheCacheKeepsOnlyWhatIsReadOfTheChildren(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cc := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	key := client.ObjectKey{Namespace: ns, Name: "basic"}
	g.Eventually(func(g Gomega) {
		live, cached := &appsv1.StatefulSet{}, &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, key, live)).To(Succeed())
		g.Expect(mgrCache.Get(ctx, key, cached)).To(Succeed())
		g.Expect(live.Spec.VolumeClaimTemplates).NotTo(BeEmpty())
		g.Expect(cached.Spec.VolumeClaimTemplates).To(BeEmpty())
		g.Expect(cached.Spec.Replicas).To(Equal(live.Spec.Replicas))
		g.Expect(cached.Spec.Selector).To(Equal(live.Spec.Selector))
		g.Expect(cached.Spec.Template.Annotations).To(Equal(live.Spec.Template.Annotations))
		g.Expect(cached.Spec.Template.Spec.Containers).To(HaveLen(len(live.Spec.Template.Spec.Containers)))
		for i, c := range live.Spec.Template.Spec.Containers {
			got := cached.Spec.Template.Spec.Containers[i]
			g.Expect(got.Name).To(Equal(c.Name))
			g.Expect(got.Image).To(Equal(c.Image))
			g.Expect(got.Resources).To(Equal(c.Resources))
			g.Expect(got.Env).To(BeEmpty())
			g.Expect(got.ReadinessProbe).To(BeNil())
		}
		g.Expect(cached.Spec.Template.Spec.Volumes).To(BeEmpty())

		svc := &corev1.Service{}
		g.Expect(mgrCache.Get(ctx, key, svc)).To(Succeed())
		g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
		g.Expect(svc.Spec.ClusterIP).NotTo(BeEmpty())
		g.Expect(svc.Spec.Ports).To(BeEmpty())
		g.Expect(svc.Spec.Selector).To(BeEmpty())

		nps := &networkingv1.NetworkPolicyList{}
		g.Expect(mgrCache.List(ctx, nps, client.InNamespace(ns))).To(Succeed())
		g.Expect(nps.Items).NotTo(BeEmpty())
		for _, np := range nps.Items {
			g.Expect(np.Spec).To(Equal(networkingv1.NetworkPolicySpec{}))
		}
		pdbs := &policyv1.PodDisruptionBudgetList{}
		g.Expect(mgrCache.List(ctx, pdbs, client.InNamespace(ns))).To(Succeed())
		g.Expect(pdbs.Items).NotTo(BeEmpty())
		for _, pdb := range pdbs.Items {
			g.Expect(pdb.Spec).To(Equal(policyv1.PodDisruptionBudgetSpec{}))
		}
	}, timeout, interval).Should(Succeed())
}

// TestTheCacheKeepsOnlyWhatIsReadOfAPod: a cached pod keeps its status
// and, of its spec, the containers' names, images and arguments and the
// claims it mounts; its environment, probes and other volumes are not
// held in memory.
func TestTheCacheKeepsOnlyWhatIsReadOfAPod(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = ns, "basic-0"
	pod.Labels = map[string]string{cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue, cachev1alpha1.LabelCluster: "basic"}
	pod.Spec = corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "redis", Image: "redis:7.0.15", Args: []string{"--key-prefix=x/"},
			Env:            []corev1.EnvVar{{Name: "REDIS_PASSWORD", Value: "not cached"}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"redis-cli", "ping"}}}},
		}},
		Volumes: []corev1.Volume{
			{Name: "backups", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "store"}}},
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "basic"}}}},
		},
	}
	g.Expect(k8s.Create(ctx, pod)).To(Succeed())
	cached := &corev1.Pod{}
	g.Eventually(func() error { return mgrCache.Get(ctx, client.ObjectKeyFromObject(pod), cached) }, timeout, interval).Should(Succeed())
	g.Expect(cached.ManagedFields).To(BeEmpty())
	g.Expect(cached.Spec.Containers).To(Equal([]corev1.Container{{Name: "redis", Image: "redis:7.0.15", Args: []string{"--key-prefix=x/"}}}))
	g.Expect(cached.Spec.Volumes).To(Equal([]corev1.Volume{pod.Spec.Volumes[0]}))
	g.Expect(cached.Status.Phase).To(Equal(corev1.PodPending), "the status is kept")
}
