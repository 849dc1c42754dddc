package renderer

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// The pre-check pod is the StatefulSet's pod as the target values render
// it (not as spec or the approved values do), run once on empty folders
// with its own ConfigMap, and reachable through no Service.
func TestRenderPrecheck(t *testing.T) {
	g := NewWithT(t)
	cc := loadExamples(t)["basic"]
	cc.Status.Rollout = &cachev1alpha1.RolloutStatus{RolloutValues: SpecValues(cc)}
	target := SpecValues(cc)
	target.Engine, target.Version = cachev1alpha1.EngineValkey, "8.0.1"
	target.Config = map[string]cachev1alpha1.ConfigValue{"maxmemory-policy": "allkeys-lfu"}

	podU, cmU, err := RenderPrecheck(cc, target, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cc.Status.Rollout.Version).To(Equal("7.0.15"), "the CacheCluster passed in is not changed")

	// What the StatefulSet and its ConfigMap become once target is approved.
	want := cc.DeepCopy()
	want.Status.Rollout = &cachev1alpha1.RolloutStatus{RolloutValues: target}
	objs, err := Render(want, DefaultCapabilities())
	g.Expect(err).NotTo(HaveOccurred())
	var sts appsv1.StatefulSet
	var conf corev1.ConfigMap
	var selectors []labels.Selector
	for _, o := range objs {
		switch o.GetKind() {
		case "StatefulSet":
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &sts)).To(Succeed())
		case "ConfigMap":
			if o.GetName() == "basic-config" {
				g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &conf)).To(Succeed())
			}
		case "Service":
			sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector")
			g.Expect(sel).NotTo(BeEmpty())
			selectors = append(selectors, labels.SelectorFromSet(sel))
		}
	}
	g.Expect(selectors).To(HaveLen(3))

	for _, u := range []*unstructured.Unstructured{podU, cmU} {
		g.Expect(u.GetName()).To(Equal("basic-precheck"))
		g.Expect(u.GetNamespace()).To(Equal("default"))
		g.Expect(u.GetLabels()).To(Equal(map[string]string{
			cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue,
			cachev1alpha1.LabelPrecheck:  "basic",
		}))
		g.Expect(u.GetOwnerReferences()).To(BeEmpty(), "the caller sets the controller reference")
		g.Expect(u.Object).NotTo(HaveKey("status"))
		g.Expect(u.Object["metadata"]).NotTo(HaveKey("creationTimestamp"))
	}
	g.Expect(podU.GetAPIVersion()).To(Equal("v1"))
	g.Expect(podU.GetKind()).To(Equal("Pod"))
	g.Expect(cmU.GetAPIVersion()).To(Equal("v1"))
	g.Expect(cmU.GetKind()).To(Equal("ConfigMap"))

	var pod corev1.Pod
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(podU.Object, &pod)).To(Succeed())
	var cm corev1.ConfigMap
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(cmU.Object, &cm)).To(Succeed())

	g.Expect(pod.Annotations).To(Equal(map[string]string{cachev1alpha1.AnnotationTemplateKey: TemplateKey(target)}))
	for _, sel := range selectors {
		g.Expect(sel.Matches(labels.Set(pod.Labels))).To(BeFalse(), "Service selector %s selects the pre-check pod", sel)
	}
	g.Expect(labels.SelectorFromSet(sts.Spec.Selector.MatchLabels).Matches(labels.Set(pod.Labels))).To(BeFalse(), "the StatefulSet would adopt it")

	// The pod template, run once, on empty folders, reading its own
	// ConfigMap: nothing else differs.
	g.Expect(pod.Spec.Containers[0].Image).To(Equal("valkey/valkey:8.0.1"))
	g.Expect(pod.Spec.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
	g.Expect(sts.Spec.VolumeClaimTemplates).NotTo(BeEmpty())
	expected := sts.Spec.Template.Spec.DeepCopy()
	expected.RestartPolicy = corev1.RestartPolicyNever
	expected.TerminationGracePeriodSeconds = pod.Spec.TerminationGracePeriodSeconds
	// Not kept apart from the cluster's pods, which would leave it no node.
	g.Expect(expected.Affinity).NotTo(BeNil())
	g.Expect(expected.TopologySpreadConstraints).NotTo(BeEmpty())
	expected.Affinity, expected.TopologySpreadConstraints = nil, nil
	renamed := 0
	for i, v := range expected.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == "basic-config" {
			expected.Volumes[i].ConfigMap.Name = "basic-precheck"
			renamed++
		}
	}
	g.Expect(renamed).To(Equal(1))
	expected.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	for _, c := range sts.Spec.VolumeClaimTemplates {
		expected.Volumes = append(expected.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	g.Expect(pod.Spec).To(Equal(*expected))
	g.Expect(*pod.Spec.TerminationGracePeriodSeconds).To(BeNumerically("<", *sts.Spec.Template.Spec.TerminationGracePeriodSeconds))
	for _, v := range pod.Spec.Volumes {
		g.Expect(v.PersistentVolumeClaim).To(BeNil(), "volume %s", v.Name)
	}

	// Its ConfigMap holds the target's redis.conf.
	g.Expect(cm.Data).To(Equal(conf.Data))
	g.Expect(cm.Data["redis.conf"]).To(ContainSubstring("maxmemory-policy allkeys-lfu"))
}

// With a seed source, the pre-check pod first copies that pod's data into
// its empty data folder (manager precheck-seed, the operator's image, the
// server's password) and reports what it copied in its termination message.
func TestRenderPrecheckWithASeed(t *testing.T) {
	g := NewWithT(t)
	cc := loadExamples(t)["basic"]
	cc.Status.Rollout = &cachev1alpha1.RolloutStatus{RolloutValues: SpecValues(cc)}
	target := SpecValues(cc)
	target.Engine, target.Version = cachev1alpha1.EngineValkey, "8.0.1"

	plain, _, err := RenderPrecheck(cc, target, "")
	g.Expect(err).NotTo(HaveOccurred())
	podU, _, err := RenderPrecheck(cc, target, "10.0.0.7:6379")
	g.Expect(err).NotTo(HaveOccurred())
	var without, pod corev1.Pod
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(plain.Object, &without)).To(Succeed())
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(podU.Object, &pod)).To(Succeed())

	g.Expect(pod.Spec.Containers).To(Equal(without.Spec.Containers), "the server runs as without a seed")
	g.Expect(pod.Spec.InitContainers).To(HaveLen(1))
	seed := pod.Spec.InitContainers[0]
	g.Expect(seed.Name).To(Equal(SeedContainerName))
	g.Expect(seed.Image).To(Equal(RestoreImage))
	g.Expect(seed.Command).To(Equal([]string{"/manager", "precheck-seed"}))
	g.Expect(seed.Args).To(ContainElements("--from=10.0.0.7:6379", "--data-dir=/data", "--report="+SeedMessagePath))
	g.Expect(seed.TerminationMessagePath).To(Equal(SeedMessagePath))
	g.Expect(seed.Env).To(HaveLen(1))
	g.Expect(seed.Env[0].Name).To(Equal("REDIS_PASSWORD"))
	g.Expect(seed.Env[0].ValueFrom.SecretKeyRef).NotTo(BeNil())
	var mounts []string
	for _, m := range seed.VolumeMounts {
		mounts = append(mounts, m.Name+":"+m.MountPath)
	}
	g.Expect(mounts).To(ConsistOf("data:/data", "seed-report:/var/run/cacheops-seed"))
	var emptyDirs []string
	for _, v := range pod.Spec.Volumes {
		g.Expect(v.PersistentVolumeClaim).To(BeNil(), "volume %s", v.Name)
		if v.EmptyDir != nil {
			emptyDirs = append(emptyDirs, v.Name)
		}
	}
	g.Expect(emptyDirs).To(ContainElements("data", "seed-report"))
}

// A sharded cluster's pre-check pod runs the node as the cluster's pods do
// (cluster mode, its own address announced, its node file on its data
// folder, which is empty: it joins no cluster) on a copy of one shard.
func TestRenderPrecheckOfAShardedCluster(t *testing.T) {
	g := NewWithT(t)
	cc := loadExamples(t)["sharded"]
	cc.Status.Rollout = &cachev1alpha1.RolloutStatus{RolloutValues: SpecValues(cc)}
	target := SpecValues(cc)
	target.Engine, target.Version = cachev1alpha1.EngineValkey, "8.0.1"
	podU, cmU, err := RenderPrecheck(cc, target, "10.0.0.7:6379")
	g.Expect(err).NotTo(HaveOccurred())
	var pod corev1.Pod
	var cm corev1.ConfigMap
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(podU.Object, &pod)).To(Succeed())
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(cmU.Object, &cm)).To(Succeed())
	g.Expect(pod.Spec.Containers[0].Command).To(Equal([]string{"valkey-server"}))
	g.Expect(pod.Spec.Containers[0].Args).To(ContainElements("--cluster-announce-ip", "$(POD_IP)"))
	g.Expect(cm.Data["redis.conf"]).To(And(ContainSubstring("\ncluster-enabled yes\n"), ContainSubstring("\ncluster-config-file /data/nodes.conf\n")))
	g.Expect(pod.Spec.InitContainers).To(ConsistOf(HaveField("Name", SeedContainerName)))
	for _, v := range pod.Spec.Volumes {
		if v.Name == "data" {
			g.Expect(v.EmptyDir).NotTo(BeNil(), "the node file starts empty")
		}
	}
}
