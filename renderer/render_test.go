package renderer

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// LoadExamples reads every CacheCluster in the examples folder.
func loadExamples(t testing.TB) map[string]*cachev1alpha1.CacheCluster {
	t.Helper()
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	out := map[string]*cachev1alpha1.CacheCluster{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cc := &cachev1alpha1.CacheCluster{}
		if err := yaml.UnmarshalStrict(data, cc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".yaml")] = cc
	}
	return out
}

// EncodeObjects writes objects as one multi-document YAML stream.
func encodeObjects(t testing.TB, objs []*unstructured.Unstructured) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(data)
	}
	return buf.Bytes()
}

func TestRenderGoldenExamples(t *testing.T) {
	for name, cc := range loadExamples(t) {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			objs, err := Render(cc, DefaultCapabilities())
			g.Expect(err).NotTo(HaveOccurred())
			got := encodeObjects(t, objs)

			golden := filepath.Join("testdata", "golden", name+".yaml")
			if *update {
				g.Expect(os.MkdirAll(filepath.Dir(golden), 0o755)).To(Succeed())
				g.Expect(os.WriteFile(golden, got, 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(golden)
			g.Expect(err).NotTo(HaveOccurred(), "golden file missing: run go test ./renderer -update")
			g.Expect(string(got)).To(Equal(string(want)), "rendered objects differ from %s; if the change is intended run go test ./renderer -update", golden)
		})
	}
}

func TestRenderObjectsAndOrder(t *testing.T) {
	g := NewWithT(t)
	cc := loadExamples(t)["basic"]
	objs, err := Render(cc, DefaultCapabilities())
	g.Expect(err).NotTo(HaveOccurred())

	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
		g.Expect(o.GetNamespace()).To(Equal("default"))
		g.Expect(o.GetLabels()).To(HaveKeyWithValue(cachev1alpha1.LabelCluster, "basic"))
		g.Expect(o.GetLabels()).To(HaveKeyWithValue(cachev1alpha1.LabelManagedBy, cachev1alpha1.ManagedByValue))
	}
	g.Expect(kinds).To(Equal([]string{
		"NetworkPolicy/basic",
		"PodDisruptionBudget/basic",
		"Secret/basic-auth",
		"ConfigMap/basic-config",
		"Service/basic",
		"Service/basic-headless",
		"Service/basic-read",
		"StatefulSet/basic",
	}))

	sts := objs[len(objs)-1]
	strategy, _, _ := unstructured.NestedString(sts.Object, "spec", "updateStrategy", "type")
	g.Expect(strategy).To(Equal("OnDelete"))
	whenDeleted, _, _ := unstructured.NestedString(sts.Object, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted")
	g.Expect(whenDeleted).To(Equal("Delete"))
	replicas, _, _ := unstructured.NestedInt64(sts.Object, "spec", "replicas")
	g.Expect(replicas).To(Equal(int64(3)))
	containers, _, _ := unstructured.NestedSlice(sts.Object, "spec", "template", "spec", "containers")
	g.Expect(containers).To(HaveLen(1))
	c := containers[0].(map[string]any)
	g.Expect(c["image"]).To(Equal("redis:7.0.15"))
	sc := c["securityContext"].(map[string]any)
	g.Expect(sc["readOnlyRootFilesystem"]).To(BeTrue())
	g.Expect(sc["allowPrivilegeEscalation"]).To(BeFalse())
	g.Expect(sc["capabilities"]).To(Equal(map[string]any{"drop": []any{"ALL"}}))
	podSC, _, _ := unstructured.NestedMap(sts.Object, "spec", "template", "spec", "securityContext")
	g.Expect(podSC["runAsNonRoot"]).To(BeTrue())
	g.Expect(podSC["seccompProfile"]).To(Equal(map[string]any{"type": "RuntimeDefault"}))

	// The client Service reaches only the master.
	client := objs[4]
	selector, _, _ := unstructured.NestedStringMap(client.Object, "spec", "selector")
	g.Expect(selector).To(HaveKeyWithValue(cachev1alpha1.LabelRole, cachev1alpha1.RoleMaster))
}

// spec.backup.pvc adds the backup-store pod, which mounts the claim and is
// no cache pod; a restore from a claim mounts it read only in every cache
// pod and keeps the store until the restore is checked.
func TestRenderVolumeBackupTarget(t *testing.T) {
	g := NewWithT(t)
	cc := loadExamples(t)["basic"]
	cc.Spec.Backup.PVC = &cachev1alpha1.PVCTarget{ClaimName: "backups"}
	objs, err := Render(cc, DefaultCapabilities())
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]map[string]any{}
	for _, o := range objs {
		byName[o.GetKind()+"/"+o.GetName()] = o.Object
	}
	store := byName["StatefulSet/basic-backup-store"]
	g.Expect(store).NotTo(BeNil())
	g.Expect(byName).To(HaveKey("NetworkPolicy/basic-backup-store"))
	podLabels, _, _ := unstructured.NestedStringMap(store, "spec", "template", "metadata", "labels")
	g.Expect(podLabels).NotTo(HaveKey(cachev1alpha1.LabelCluster), "the store pod is no cache pod")
	g.Expect(podLabels).To(HaveKeyWithValue(cachev1alpha1.LabelManagedBy, cachev1alpha1.ManagedByValue))
	storeArgs, _, _ := unstructured.NestedSlice(store, "spec", "template", "spec", "containers")
	g.Expect(storeArgs[0].(map[string]any)["args"]).To(ContainElement("--key-prefix=default/basic/"), "only its own folder")
	g.Expect(storeArgs[0].(map[string]any)["args"]).NotTo(ContainElement("--read-only"))
	volumes, _, _ := unstructured.NestedSlice(store, "spec", "template", "spec", "volumes")
	g.Expect(volumes).To(ContainElement(HaveKeyWithValue("persistentVolumeClaim", map[string]any{"claimName": "backups"})))
	cacheInit, _, _ := unstructured.NestedSlice(byName["StatefulSet/basic"], "spec", "template", "spec", "initContainers")
	g.Expect(cacheInit).To(BeEmpty(), "backing up to a claim restarts no cache pod")

	restored := loadExamples(t)["basic"]
	restored.Name = "copy"
	restored.Spec.Restore = &cachev1alpha1.RestoreSpec{Key: "default/basic/b.rdb", PVC: &cachev1alpha1.PVCTarget{ClaimName: "backups"}}
	objs, err = Render(restored, DefaultCapabilities())
	g.Expect(err).NotTo(HaveOccurred())
	var sts, restoreStore map[string]any
	for _, o := range objs {
		switch {
		case o.GetKind() == "StatefulSet" && o.GetName() == "copy":
			sts = o.Object
		case o.GetKind() == "StatefulSet" && o.GetName() == "copy-backup-store":
			restoreStore = o.Object
		}
	}
	g.Expect(restoreStore).NotTo(BeNil(), "the operator checks the restore through it")
	storeArgs, _, _ = unstructured.NestedSlice(restoreStore, "spec", "template", "spec", "containers")
	g.Expect(storeArgs[0].(map[string]any)["args"]).To(ContainElements("--key-prefix=default/basic/b.rdb", "--read-only"), "only the dump and its metadata")
	inits, _, _ := unstructured.NestedSlice(sts, "spec", "template", "spec", "initContainers")
	g.Expect(inits).To(HaveLen(1))
	args := inits[0].(map[string]any)["args"]
	g.Expect(args).To(ContainElements("--dir=/backups", "--claim=backups"))
	g.Expect(inits[0].(map[string]any)).NotTo(HaveKey("env"), "no S3 credentials")
	podVolumes, _, _ := unstructured.NestedSlice(sts, "spec", "template", "spec", "volumes")
	g.Expect(podVolumes).To(ContainElement(HaveKeyWithValue("persistentVolumeClaim", map[string]any{"claimName": "backups", "readOnly": true})))

	// Checked: the store goes (this cluster backs up nowhere).
	restored.Status.Conditions = []metav1.Condition{{Type: cachev1alpha1.ConditionRestored, Status: metav1.ConditionTrue}}
	objs, err = Render(restored, DefaultCapabilities())
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		g.Expect(o.GetName()).NotTo(Equal("copy-backup-store"))
	}
}

func TestRenderConfigAndSpecFields(t *testing.T) {
	g := NewWithT(t)
	cc := loadExamples(t)["production"]
	objs, err := Render(cc, DefaultCapabilities())
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byName[o.GetKind()+"/"+o.GetName()] = o
	}
	g.Expect(byName).NotTo(HaveKey("Secret/sessions-auth"), "no Secret is declared when the password comes from the user's Secret")

	conf, _, _ := unstructured.NestedString(byName["ConfigMap/sessions-config"].Object, "data", "redis.conf")
	g.Expect(conf).To(ContainSubstring("\nmaxmemory 768mb\n"))
	g.Expect(conf).To(ContainSubstring("\nmaxmemory-policy allkeys-lru\n"))
	// Every process starts as a replica of the placeholder the planner
	// recognises (plan.StartedAsReplica).
	g.Expect(conf).To(ContainSubstring(fmt.Sprintf("\nreplicaof %s %s\n", cachev1alpha1.StartupMasterHost, cachev1alpha1.StartupMasterPort)))
	// User parameters come after the operator's, in a stable order.
	g.Expect(strings.Index(conf, "maxmemory ")).To(BeNumerically("<", strings.Index(conf, "timeout ")))

	sts := byName["StatefulSet/sessions"]
	whenDeleted, _, _ := unstructured.NestedString(sts.Object, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted")
	g.Expect(whenDeleted).To(Equal("Retain"))
	templates, _, _ := unstructured.NestedSlice(sts.Object, "spec", "volumeClaimTemplates")
	pvc := templates[0].(map[string]any)
	g.Expect(pvc["spec"].(map[string]any)["storageClassName"]).To(Equal("fast-ssd"))
	g.Expect(pvc["spec"].(map[string]any)["resources"]).To(Equal(map[string]any{"requests": map[string]any{"storage": "10Gi"}}))
	g.Expect(yamlOf(t, sts)).To(ContainSubstring("name: sessions-redis-password"))
	g.Expect(yamlOf(t, sts)).To(ContainSubstring("memory: 1Gi"))
}

func yamlOf(t *testing.T, o *unstructured.Unstructured) string {
	data, err := yaml.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// Argo CD tracks its resources with a label or annotation on the
// CacheCluster; copying either to children would make Argo CD prune them.
func TestRenderNeverCopiesParentLabelsOrAnnotations(t *testing.T) {
	g := NewWithT(t)
	cc := loadExamples(t)["basic"].DeepCopy()
	cc.Labels = map[string]string{"app.kubernetes.io/instance": "my-argo-app", "argocd.argoproj.io/instance": "x"}
	cc.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "my-app:cache.cacheops.io/CacheCluster:default/basic"}
	objs, err := Render(cc, DefaultCapabilities())
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		data := yamlOf(t, o)
		g.Expect(data).NotTo(ContainSubstring("argocd"), o.GetKind())
		g.Expect(data).NotTo(ContainSubstring("app.kubernetes.io/instance"), o.GetKind())
	}
}

func TestRenderIsDeterministicAndCachedResultsAreCopies(t *testing.T) {
	g := NewWithT(t)
	r, err := New()
	g.Expect(err).NotTo(HaveOccurred())
	cc := loadExamples(t)["production"]

	first, err := r.Render(cc, DefaultCapabilities())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.cache.len()).To(Equal(1))
	want := encodeObjects(t, first)

	// Changing what the caller got must not change the next result.
	first[0].SetName("changed")
	for i := 0; i < 20; i++ {
		again, err := r.Render(cc, DefaultCapabilities())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(encodeObjects(t, again)).To(Equal(want))
	}
	g.Expect(r.cache.len()).To(Equal(1), "unchanged input must hit the cache")

	other := cc.DeepCopy()
	other.Spec.Replicas = ptr.To[int32](7)
	_, err = r.Render(other, DefaultCapabilities())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.cache.len()).To(Equal(2))
}

func TestResultCacheEvictsLeastRecentlyUsed(t *testing.T) {
	g := NewWithT(t)
	c := newResultCache(2)
	c.put("a", nil)
	c.put("b", nil)
	_, _ = c.get("a")
	c.put("c", nil)
	_, okA := c.get("a")
	_, okB := c.get("b")
	g.Expect(okA).To(BeTrue())
	g.Expect(okB).To(BeFalse())
	g.Expect(c.len()).To(Equal(2))
}

func TestValuesDefaultsMatchTheCRD(t *testing.T) {
	g := NewWithT(t)
	cc := &cachev1alpha1.CacheCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Spec:       cachev1alpha1.CacheClusterSpec{Version: "7.0.15"},
	}
	v, err := Values(cc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v["namespace"]).To(Equal("default"))
	g.Expect(v["replicas"]).To(Equal(int64(3)))
	g.Expect(v["engine"]).To(Equal("redis"))
	g.Expect(v["image"]).To(Equal("redis:7.0.15"))
	g.Expect(v["storage"]).To(HaveKeyWithValue("size", "1Gi"))
	g.Expect(v["probeTimeoutSeconds"]).To(Equal(int64(5)))
	g.Expect(v["auth"]).To(Equal(map[string]any{"secretName": "x-auth", "secretKey": "password", "generated": true}))
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name    string
		given   *cachev1alpha1.CacheCluster
		wantErr string
	}{
		{
			name:    "no name",
			given:   &cachev1alpha1.CacheCluster{Spec: cachev1alpha1.CacheClusterSpec{Version: "7.0.15"}},
			wantErr: "metadata.name is empty",
		},
		{
			name:    "no version",
			given:   &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
			wantErr: "spec.version is empty",
		},
		{
			name: "negative storage",
			given: &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: cachev1alpha1.CacheClusterSpec{
				Version: "7.0.15", Storage: cachev1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("-1Gi"))},
			}},
			wantErr: "spec.storage.size must be positive",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Render(tt.given, DefaultCapabilities())
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}

func TestBrokenChartGivesAnErrorNotAPanic(t *testing.T) {
	g := NewWithT(t)
	fsys := fstest.MapFS{
		"c/Chart.yaml":          {Data: []byte("apiVersion: v2\nname: c\nversion: 0.1.0\n")},
		"c/templates/bad.yaml":  {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name | required \"name is required\" }}\n")},
		"c/templates/hook.yaml": {Data: []byte("")},
	}
	r, err := NewFromFS(fsys, "c")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = r.RenderValues(map[string]any{}, DefaultCapabilities())
	g.Expect(err).To(MatchError(ContainSubstring("name is required")))
}

// FuzzRender checks that any spec renders or fails with an error, never a
// panic. The API server accepts far less than this, so this is a superset.
func FuzzRender(f *testing.F) {
	f.Add("basic", "7.0.15", int32(3), "1Gi", "maxmemory", "100mb", "", false)
	f.Add("x", "7", int32(0), "0", "", "", "img", true)
	f.Add("a-b", "7.2.4", int32(15), "10Ti", "save", "", "secret", true)
	f.Fuzz(func(t *testing.T, name, version string, replicas int32, size, key, value, secret string, retain bool) {
		cc := &cachev1alpha1.CacheCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: cachev1alpha1.CacheClusterSpec{
				Version:  version,
				Replicas: &replicas,
				Config:   map[string]cachev1alpha1.ConfigValue{key: cachev1alpha1.ConfigValue(value)},
				Storage:  cachev1alpha1.StorageSpec{RetainOnDelete: retain},
			},
		}
		if q, err := resource.ParseQuantity(size); err == nil {
			cc.Spec.Storage.Size = &q
		}
		if secret != "" {
			cc.Spec.Auth.SecretRef = &cachev1alpha1.SecretKeyRef{Name: secret}
		}
		objs, err := Render(cc, DefaultCapabilities())
		if err == nil && len(objs) == 0 {
			t.Fatal("render succeeded without objects")
		}
	})
}

// probeTimeoutSeconds is the failure detector's timeout. The readiness
// probe only keeps a pod that cannot serve out of the Services, and the
// liveness probe kills a process that no longer accepts connections; a
// short timeout took healthy masters out of the Services, or killed them,
// on a busy node, so neither goes under 5 s. The startup probe follows
// probeTimeoutSeconds: a miss only waits for the next of its 150 tries.
func TestReadinessAndLivenessProbeTimeoutsAreNeverUnderFiveSeconds(t *testing.T) {
	for _, tc := range []struct {
		probeTimeout                             int32
		wantReadiness, wantLiveness, wantStartup int64
	}{
		{probeTimeout: 1, wantReadiness: 5, wantLiveness: 5, wantStartup: 1},
		{probeTimeout: 0, wantReadiness: 5, wantLiveness: 5, wantStartup: 5},
		{probeTimeout: 8, wantReadiness: 8, wantLiveness: 8, wantStartup: 8},
	} {
		t.Run(fmt.Sprintf("probeTimeoutSeconds=%d", tc.probeTimeout), func(t *testing.T) {
			g := NewWithT(t)
			cc := &cachev1alpha1.CacheCluster{
				ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "team"},
				Spec:       cachev1alpha1.CacheClusterSpec{Version: "7.0.15"},
			}
			cc.Spec.HighAvailability.ProbeTimeoutSeconds = tc.probeTimeout
			objs, err := Render(cc, DefaultCapabilities())
			g.Expect(err).NotTo(HaveOccurred())
			var container map[string]any
			for _, o := range objs {
				if o.GetKind() != "StatefulSet" {
					continue
				}
				containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				container = containers[0].(map[string]any)
			}
			g.Expect(container).NotTo(BeNil(), "no StatefulSet rendered")
			readiness, _, _ := unstructured.NestedInt64(container, "readinessProbe", "timeoutSeconds")
			liveness, _, _ := unstructured.NestedInt64(container, "livenessProbe", "timeoutSeconds")
			startup, _, _ := unstructured.NestedInt64(container, "startupProbe", "timeoutSeconds")
			g.Expect(readiness).To(Equal(tc.wantReadiness))
			g.Expect(liveness).To(Equal(tc.wantLiveness))
			g.Expect(startup).To(Equal(tc.wantStartup))
		})
	}
}
