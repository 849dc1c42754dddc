package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/examples"
)

const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
)

// loadExample reads examples/NAME.yaml into namespace ns.
func loadExample(t *testing.T, name, ns string) *cachev1alpha1.CacheCluster {
	t.Helper()
	cc, err := examples.Load(name, ns)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

func getCC(g Gomega, cc *cachev1alpha1.CacheCluster) *cachev1alpha1.CacheCluster {
	out := &cachev1alpha1.CacheCluster{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(cc), out)).To(Succeed())
	return out
}

func condition(cc *cachev1alpha1.CacheCluster, t string) *metav1.Condition {
	return meta.FindStatusCondition(cc.Status.Conditions, t)
}

// markStatefulSetReady plays the StatefulSet controller, which envtest does
// not run: every pod exists, is ready and runs the latest revision.
func markStatefulSetReady(g Gomega, ns, name string) {
	ctx := context.Background()
	sts := &appsv1.StatefulSet{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts)).To(Succeed())
	n := *sts.Spec.Replicas
	sts.Status = appsv1.StatefulSetStatus{
		ObservedGeneration: sts.Generation,
		Replicas:           n, ReadyReplicas: n, CurrentReplicas: n, UpdatedReplicas: n, AvailableReplicas: n,
		CurrentRevision: "rev-1", UpdateRevision: "rev-1",
	}
	g.Expect(k8s.Status().Update(ctx, sts)).To(Succeed())
}

func TestCreateRendersChildrenOwnedByCacheops(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cc := loadExample(t, "basic", ns)
	cc.Labels = map[string]string{"app.kubernetes.io/instance": "argo-app"}
	cc.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "argo-app:cache.cacheops.io/CacheCluster:" + ns + "/basic"}
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())

	children := []client.Object{
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "basic"}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "basic"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "basic-auth"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "basic-config"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "basic"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "basic-headless"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "basic-read"}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "basic"}},
	}
	created := getCC(g, cc)
	for _, child := range children {
		// The password Secret is created (field manager cacheops-auth)
		// a moment before the chart's apply reaches it.
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: child.GetName()}, child)).To(Succeed())
			managers := map[string]metav1.ManagedFieldsOperationType{}
			for _, mf := range child.GetManagedFields() {
				managers[mf.Manager] = mf.Operation
			}
			g.Expect(managers).To(HaveKeyWithValue(FieldManager, metav1.ManagedFieldsOperationApply), "%T %s", child, child.GetName())
		}, timeout, interval).Should(Succeed(), "%T %s", child, child.GetName())

		owner := metav1.GetControllerOf(child)
		g.Expect(owner).NotTo(BeNil(), "%T %s has no controller", child, child.GetName())
		g.Expect(owner.UID).To(Equal(created.UID))
		g.Expect(child.GetLabels()).NotTo(HaveKey("app.kubernetes.io/instance"))
		g.Expect(child.GetAnnotations()).NotTo(HaveKey("argocd.argoproj.io/tracking-id"))
	}

	// The generated password exists before any pod needs it.
	secret := children[2].(*corev1.Secret)
	g.Expect(secret.Data["password"]).To(HaveLen(43))

	// Without a StatefulSet controller the pods never become ready: the
	// status says so, and nothing claims the cluster is ready.
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		g.Expect(got.Finalizers).To(ContainElement(cachev1alpha1.Finalizer))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.Phase).To(Equal(cachev1alpha1.PhaseInitializing))
		g.Expect(condition(got, cachev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(condition(got, cachev1alpha1.ConditionReconciling).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(condition(got, cachev1alpha1.ConditionAvailable).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(condition(got, cachev1alpha1.ConditionStalled)).To(BeNil())
		g.Expect(got.Status.Selector).To(Equal("app.kubernetes.io/name=cachecluster,cache.cacheops.io/cluster=basic"))
	}, timeout, interval).Should(Succeed())
}

func TestStatusFollowsChildrenAndSpecChanges(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cc := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())

	g.Eventually(func(g Gomega) { markStatefulSetReady(g, ns, "basic") }, timeout, interval).Should(Succeed())
	// A pod as the StatefulSet controller would create it.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "basic-0", Namespace: ns, Labels: map[string]string{
			cachev1alpha1.LabelCluster: "basic", cachev1alpha1.LabelManagedBy: "cacheops", "app.kubernetes.io/name": "cachecluster",
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "redis", Image: "redis:7.0.15"}}},
	}
	g.Expect(k8s.Create(ctx, pod)).To(Succeed())
	pod.Status = corev1.PodStatus{PodIP: "10.0.0.7", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	g.Expect(k8s.Status().Update(ctx, pod)).To(Succeed())

	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		g.Expect(got.Status.Phase).To(Equal(cachev1alpha1.PhaseRunning))
		ready := condition(got, cachev1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(ready.Reason).To(Equal(cachev1alpha1.ReasonReconciled))
		g.Expect(condition(got, cachev1alpha1.ConditionReconciling)).To(BeNil(), "Reconciling must be removed when done")
		g.Expect(condition(got, cachev1alpha1.ConditionAvailable).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(condition(got, cachev1alpha1.ConditionDegraded).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(got.Status.ReadyReplicas).To(Equal(int32(3)))
		g.Expect(got.Status.CurrentVersion).To(Equal("7.0.15"))
		g.Expect(got.Status.Nodes).To(Equal([]cachev1alpha1.NodeStatus{{PodName: "basic-0", Address: "10.0.0.7", Ready: true}}))
	}, timeout, interval).Should(Succeed())

	// kubectl scale goes through the scale subresource.
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5}}
	g.Expect(k8s.SubResource("scale").Update(ctx, getCC(g, cc), client.WithSubResourceBody(scale))).To(Succeed())

	g.Eventually(func(g Gomega) {
		sts := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, sts)).To(Succeed())
		g.Expect(*sts.Spec.Replicas).To(Equal(int32(5)))
		got := getCC(g, cc)
		g.Expect(got.Generation).To(Equal(int64(2)))
		g.Expect(got.Status.ObservedGeneration).To(Equal(int64(2)))
		g.Expect(got.Status.Phase).To(Equal(cachev1alpha1.PhaseScaling))
		g.Expect(condition(got, cachev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(condition(got, cachev1alpha1.ConditionReconciling).Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())

	g.Eventually(func(g Gomega) { markStatefulSetReady(g, ns, "basic") }, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		g.Expect(got.Status.Phase).To(Equal(cachev1alpha1.PhaseRunning))
		g.Expect(got.Status.ReadyReplicas).To(Equal(int32(5)))
		g.Expect(condition(got, cachev1alpha1.ConditionReconciling)).To(BeNil())
	}, timeout, interval).Should(Succeed())
}

// basicAtRest creates the basic example in a namespace of its own and
// waits until it runs (its StatefulSet marked ready) and the reconciles
// caused by the controller's own writes have ended.
func basicAtRest(t *testing.T, g Gomega) *cachev1alpha1.CacheCluster {
	cc := loadExample(t, "basic", newNamespace(t))
	g.Expect(k8s.Create(context.Background(), cc)).To(Succeed())
	g.Eventually(func(g Gomega) { markStatefulSetReady(g, cc.Namespace, cc.Name) }, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getCC(g, cc).Status.Phase).To(Equal(cachev1alpha1.PhaseRunning))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(getCC(g, cc).Status.Phase).To(Equal(cachev1alpha1.PhaseRunning))
	}, 2*time.Second, interval).Should(Succeed())
	return cc
}

func TestSteadyStateSendsNoWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cc := basicAtRest(t, g)

	before := mgrWrites.count()
	runsBefore := reconcileCount()
	// Annotation changes wake the controller without changing the spec.
	for i := 0; i < 5; i++ {
		got := getCC(g, cc)
		patch := client.MergeFrom(got.DeepCopy())
		metav1.SetMetaDataAnnotation(&got.ObjectMeta, "test/poke", time.Now().Format(time.RFC3339Nano))
		g.Expect(k8s.Patch(ctx, got, patch)).To(Succeed())
		g.Eventually(reconcileCount, timeout, interval).Should(BeNumerically(">", runsBefore))
		runsBefore = reconcileCount()
	}
	time.Sleep(time.Second)
	g.Expect(mgrWrites.since(before)).To(BeEmpty(), "a steady state must not write to the API server")
}

func TestDriftIsRestored(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cc := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())

	sts := &appsv1.StatefulSet{}
	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, sts)
	}, timeout, interval).Should(Succeed())

	// Someone edits fields the operator owns.
	sts.Spec.Replicas = ptr.To[int32](1)
	sts.Spec.Template.Spec.Containers[0].Image = "redis:6.0"
	g.Expect(k8s.Update(ctx, sts, client.FieldOwner("kubectl-edit"))).To(Succeed())
	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic-config"}, cm)).To(Succeed())
	cm.Data["redis.conf"] = "port 1234\n"
	g.Expect(k8s.Update(ctx, cm, client.FieldOwner("kubectl-edit"))).To(Succeed())

	g.Eventually(func(g Gomega) {
		got := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, got)).To(Succeed())
		g.Expect(*got.Spec.Replicas).To(Equal(int32(3)))
		g.Expect(got.Spec.Template.Spec.Containers[0].Image).To(Equal("redis:7.0.15"))
		gotCM := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic-config"}, gotCM)).To(Succeed())
		g.Expect(gotCM.Data["redis.conf"]).To(ContainSubstring("port 6379"))
	}, timeout, interval).Should(Succeed())

	// A merge patch of a NetworkPolicy (the cache holds no spec of it):
	// its rules are applied again.
	np := &networkingv1.NetworkPolicy{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, np)).To(Succeed())
	want := np.Spec.DeepCopy()
	patch := client.MergeFrom(np.DeepCopy())
	np.Spec.Ingress = nil
	g.Expect(k8s.Patch(ctx, np, patch, client.FieldOwner("kubectl-patch"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &networkingv1.NetworkPolicy{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, got)).To(Succeed())
		g.Expect(got.Spec.Ingress).To(Equal(want.Ingress))
	}, timeout, interval).Should(Succeed())
}

// TestALabelSomeoneAddsIsNotDrift: someone else's write that leaves what
// day-one renders alone (a label of their own) makes day-one read the
// object once and compare it whole, and write nothing.
func TestALabelSomeoneAddsIsNotDrift(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cc := basicAtRest(t, g)
	ns := cc.Namespace

	start := mgrWrites.count()
	path := "/api/v1/namespaces/" + ns + "/services/basic"
	reads := mgrWrites.readsOf(path)
	runs := reconcileCount()
	svc := &corev1.Service{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, svc)).To(Succeed())
	patch := client.MergeFrom(svc.DeepCopy())
	metav1.SetMetaDataLabel(&svc.ObjectMeta, "team.example.com/owner", "payments")
	g.Expect(k8s.Patch(ctx, svc, patch, client.FieldOwner("kubectl-label"))).To(Succeed())
	g.Eventually(reconcileCount, timeout, interval).Should(BeNumerically(">", runs))
	// More reconciles of the same cluster: the verified version is not
	// read again.
	poke(g, cc)
	time.Sleep(time.Second)
	g.Expect(mgrWrites.since(start)).To(BeEmpty(), "a label someone added is not drift")
	g.Expect(mgrWrites.readsOf(path)-reads).To(Equal(1), "the Service someone else wrote is read once, then its version is known")
	got := &corev1.Service{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, got)).To(Succeed())
	g.Expect(got.Labels).To(HaveKeyWithValue("team.example.com/owner", "payments"))
}

func TestDeleteRemovesChildrenAndPVCsUnlessRetained(t *testing.T) {
	for _, retain := range []bool{false, true} {
		t.Run(map[bool]string{false: "delete", true: "retain"}[retain], func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := newNamespace(t)
			cc := loadExample(t, "basic", ns)
			cc.Spec.Storage.RetainOnDelete = retain
			g.Expect(k8s.Create(ctx, cc)).To(Succeed())
			g.Eventually(func() error {
				return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, &appsv1.StatefulSet{})
			}, timeout, interval).Should(Succeed())

			// PVCs as the StatefulSet controller creates them from the claim template.
			for i := 0; i < 3; i++ {
				pvc := &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Name: "data-basic-" + string(rune('0'+i)), Namespace: ns, Labels: map[string]string{
						cachev1alpha1.LabelCluster: "basic", "app.kubernetes.io/name": "cachecluster",
					}},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
					},
				}
				g.Expect(k8s.Create(ctx, pvc)).To(Succeed())
			}

			g.Expect(k8s.Delete(ctx, cc)).To(Succeed())
			g.Eventually(func() bool {
				return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(cc), &cachev1alpha1.CacheCluster{}))
			}, timeout, interval).Should(BeTrue(), "the finalizer must let the CacheCluster go")

			for _, list := range []client.ObjectList{&appsv1.StatefulSetList{}, &corev1.ConfigMapList{}, &corev1.ServiceList{}, &policyv1.PodDisruptionBudgetList{}, &networkingv1.NetworkPolicyList{}} {
				g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
				items, _ := meta.ExtractList(list)
				g.Expect(items).To(BeEmpty(), "%T", list)
			}
			secrets := &corev1.SecretList{}
			g.Expect(k8s.List(ctx, secrets, client.InNamespace(ns), client.MatchingLabels{cachev1alpha1.LabelCluster: "basic"})).To(Succeed())
			g.Expect(secrets.Items).To(BeEmpty())

			pvcs := &corev1.PersistentVolumeClaimList{}
			g.Expect(k8s.List(ctx, pvcs, client.InNamespace(ns))).To(Succeed())
			g.Expect(pvcs.Items).To(HaveLen(3))
			for _, pvc := range pvcs.Items {
				// No controller removes the pvc-protection finalizer here, so a
				// deleted PVC stays visible with a deletion timestamp.
				g.Expect(pvc.DeletionTimestamp.IsZero()).To(Equal(retain), pvc.Name)
			}
		})
	}
}

func TestPausedStopsReconciling(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cc := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, &appsv1.StatefulSet{})
	}, timeout, interval).Should(Succeed())

	got := patchCC(g, cc, func(c *cachev1alpha1.CacheCluster) {
		c.Spec.Paused = true
		c.Spec.Replicas = ptr.To[int32](5)
	})

	g.Eventually(func(g Gomega) {
		g.Expect(getCC(g, cc).Status.ObservedGeneration).To(Equal(got.Generation), "a pause is acknowledged")
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		sts := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, sts)).To(Succeed())
		g.Expect(*sts.Spec.Replicas).To(Equal(int32(3)), "nothing changes while paused")
	}, 2*time.Second, interval).Should(Succeed())

	patchCC(g, cc, func(c *cachev1alpha1.CacheCluster) { c.Spec.Paused = false })
	g.Eventually(func(g Gomega) {
		sts := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, sts)).To(Succeed())
		g.Expect(*sts.Spec.Replicas).To(Equal(int32(5)))
	}, timeout, interval).Should(Succeed())
}

func TestMissingPasswordSecretStallsWithoutApplying(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cc := loadExample(t, "basic", ns)
	cc.Spec.Auth.SecretRef = &cachev1alpha1.SecretKeyRef{Name: "mine", Key: "pw"}
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())

	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		stalled := condition(got, cachev1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Reason).To(Equal(cachev1alpha1.ReasonAuthSecretMissing))
		g.Expect(stalled.Message).To(ContainSubstring("Secret mine named in spec.auth.secretRef does not exist"))
		g.Expect(got.Status.Phase).To(Equal(cachev1alpha1.PhaseFailed))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(condition(got, cachev1alpha1.ConditionReconciling)).To(BeNil())
	}, timeout, interval).Should(Succeed())
	g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, &appsv1.StatefulSet{}))).To(BeTrue())

	g.Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns}, StringData: map[string]string{"pw": "s3cret"}})).To(Succeed())
	poke(g, cc)
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		g.Expect(condition(got, cachev1alpha1.ConditionStalled)).To(BeNil())
		g.Expect(got.Status.Phase).To(Equal(cachev1alpha1.PhaseInitializing))
		sts := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, sts)).To(Succeed())
		g.Expect(sts.Spec.Template.Spec.Containers[0].Env[0].ValueFrom.SecretKeyRef.Name).To(Equal("mine"))
	}, timeout, interval).Should(Succeed())
	g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic-auth"}, &corev1.Secret{}))).To(BeTrue(), "no password is generated when the user brings one")
}

// A spec the CRD accepts but the API server refuses to turn into a
// StatefulSet (memory limit below the request) stalls before anything is
// applied: no half-applied cluster.
func TestRefusedObjectStallsWithNothingApplied(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cc := loadExample(t, "basic", ns)
	cc.Spec.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())

	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		stalled := condition(got, cachev1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(cachev1alpha1.ReasonApplyFailed))
		g.Expect(stalled.Message).To(ContainSubstring("StatefulSet basic"))
		g.Expect(stalled.Message).To(ContainSubstring("must be less than or equal to memory limit"))
	}, timeout, interval).Should(Succeed())
	for _, c := range []struct {
		name string
		obj  client.Object
	}{{"basic-config", &corev1.ConfigMap{}}, {"basic", &corev1.Service{}}, {"basic", &appsv1.StatefulSet{}}} {
		g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.name}, c.obj))).To(BeTrue(), "%T must not be applied", c.obj)
	}
}

func TestChangingAuthPrunesTheGeneratedSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cc := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic-auth"}, &corev1.Secret{})
	}, timeout, interval).Should(Succeed())

	g.Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns}, StringData: map[string]string{"password": "s3cret"}})).To(Succeed())
	patchCC(g, cc, func(c *cachev1alpha1.CacheCluster) { c.Spec.Auth.SecretRef = &cachev1alpha1.SecretKeyRef{Name: "mine"} })
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic-auth"}, &corev1.Secret{}))
	}, timeout, interval).Should(BeTrue())
}

// poke changes an annotation so the controller reconciles without a spec change.
func poke(g Gomega, cc *cachev1alpha1.CacheCluster) {
	got := getCC(g, cc)
	patch := client.MergeFrom(got.DeepCopy())
	metav1.SetMetaDataAnnotation(&got.ObjectMeta, "test/poke", time.Now().Format(time.RFC3339Nano))
	g.Expect(k8s.Patch(context.Background(), got, patch)).To(Succeed())
}

// reconcileCount is how many day-one reconciles have finished.
func reconcileCount() float64 {
	return testutil.ToFloat64(reconcileOutcomes.WithLabelValues(ControllerName, "success")) +
		testutil.ToFloat64(reconcileOutcomes.WithLabelValues(ControllerName, "error"))
}

// patchCC changes the spec with a merge patch, which carries no
// resourceVersion: the controller writing status meanwhile causes no
// conflict.
func patchCC(g Gomega, cc *cachev1alpha1.CacheCluster, mutate func(*cachev1alpha1.CacheCluster)) *cachev1alpha1.CacheCluster {
	got := getCC(g, cc)
	patch := client.MergeFrom(got.DeepCopy())
	mutate(got)
	g.Expect(k8s.Patch(context.Background(), got, patch)).To(Succeed())
	return got
}

// A backup schedule CEL lets through but cron refuses, a restore from a
// CacheBackup that has not completed, and one of a dump newer than the
// engine version reads, stall the cluster before anything is applied; a completed one is resolved into status.restoreFrom and rendered
// as the restore init container.
func TestBackupScheduleAndRestoreSourceStall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cc := loadExample(t, "basic", ns)
	cc.Spec.Backup = cachev1alpha1.BackupSpec{Enabled: true, Schedule: "61 * * * *", S3: &cachev1alpha1.S3Target{Endpoint: "s3.example.com", Bucket: "bkp", CredentialsSecret: "s3"}}
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		stalled := condition(getCC(g, cc), cachev1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(cachev1alpha1.ReasonInvalidBackupSchedule))
		g.Expect(stalled.Message).To(ContainSubstring(`backup.schedule "61 * * * *"`))
	}, timeout, interval).Should(Succeed())
	g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(cc), &appsv1.StatefulSet{}))).To(BeTrue())

	restored := loadExample(t, "basic", ns)
	restored.Name = "restored"
	restored.Spec.Restore = &cachev1alpha1.RestoreSpec{Backup: "basic-1"}
	g.Expect(k8s.Create(ctx, restored)).To(Succeed())
	g.Eventually(func(g Gomega) {
		stalled := condition(getCC(g, restored), cachev1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(cachev1alpha1.ReasonRestoreSourceNotReady))
		g.Expect(stalled.Message).To(ContainSubstring(`no CacheBackup "basic-1"`))
	}, timeout, interval).Should(Succeed())
	g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(restored), &appsv1.StatefulSet{}))).To(BeTrue())

	cb := &cachev1alpha1.CacheBackup{ObjectMeta: metav1.ObjectMeta{Name: "basic-1", Namespace: ns}, Spec: cachev1alpha1.CacheBackupSpec{Cluster: "basic"}}
	g.Expect(k8s.Create(ctx, cb)).To(Succeed())
	loc := &cachev1alpha1.BackupLocation{S3: cc.Spec.Backup.S3, Key: "ns/basic/basic-1.rdb"}
	// A Valkey 8.0 dump (RDB 11) into Redis 7.0.15: refused before any
	// pod exists.
	cb.Status = cachev1alpha1.CacheBackupStatus{Phase: cachev1alpha1.BackupCompleted, Location: loc, RDBVersion: 11}
	g.Expect(k8s.Status().Update(ctx, cb)).To(Succeed())
	poke(g, restored)
	g.Eventually(func(g Gomega) {
		stalled := condition(getCC(g, restored), cachev1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(cachev1alpha1.ReasonRestoreIncompatible))
		g.Expect(stalled.Message).To(ContainSubstring("CacheBackup basic-1 is an RDB version 11 dump, and redis 7.0.15 reads RDB version 10 at most"))
	}, timeout, interval).Should(Succeed())
	g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(restored), &appsv1.StatefulSet{}))).To(BeTrue())
	g.Expect(getCC(g, restored).Status.RestoreFrom).To(BeNil())

	// A Redis 7.0 dump (RDB 10) is restored.
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cb), cb)).To(Succeed())
	cb.Status.RDBVersion = 10
	g.Expect(k8s.Status().Update(ctx, cb)).To(Succeed())
	poke(g, restored)
	g.Eventually(func(g Gomega) {
		got := getCC(g, restored)
		g.Expect(condition(got, cachev1alpha1.ConditionStalled)).To(BeNil())
		g.Expect(got.Status.RestoreFrom).To(Equal(loc))
		sts := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(restored), sts)).To(Succeed())
		g.Expect(sts.Spec.Template.Spec.InitContainers).To(HaveLen(1))
		g.Expect(sts.Spec.Template.Spec.InitContainers[0].Args).To(ContainElement("--config-dir=/etc/cacheops/restore"))
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: restored.Namespace, Name: restored.Name + "-restore"}, cm)).To(Succeed())
		g.Expect(cm.Data).To(Equal(map[string]string{"state": "pending", "key": "ns/basic/basic-1.rdb", "replace": ""}))
	}, timeout, interval).Should(Succeed())
}
