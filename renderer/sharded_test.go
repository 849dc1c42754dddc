package renderer

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// A sharded cluster runs every pod in cluster mode with the layout's pod
// count; the failure detector's timeout follows probeTimeoutSeconds and
// the replicas elect a new master only when automatic failover is on. A
// replication cluster renders none of it.
func TestRenderSharded(t *testing.T) {
	render := func(cc *cachev1alpha1.CacheCluster) (conf, sts string, policy string) {
		t.Helper()
		g := NewWithT(t)
		objs, err := Render(cc, DefaultCapabilities())
		g.Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			switch o.GetKind() {
			case "ConfigMap":
				if o.GetName() == cc.Name+"-config" {
					conf, _, _ = unstructured.NestedString(o.Object, "data", "redis.conf")
				}
			case "StatefulSet":
				if o.GetName() == cc.Name {
					sts = yamlOf(t, o)
				}
			case "NetworkPolicy":
				policy = yamlOf(t, o)
			}
		}
		return conf, sts, policy
	}
	tests := []struct {
		name         string
		mutate       func(*cachev1alpha1.CacheCluster)
		wantConf     []string
		wantReplicas string
	}{
		{"defaults", func(*cachev1alpha1.CacheCluster) {},
			[]string{"\ncluster-enabled yes\n", "\ncluster-config-file /data/nodes.conf\n", "\ncluster-node-timeout 5000\n", "\ncluster-replica-no-failover no\n"}, "replicas: 6\n"},
		{"two replicas per shard, a short probe timeout", func(cc *cachev1alpha1.CacheCluster) {
			cc.Spec.Shards, cc.Spec.ReplicasPerShard = ptr.To[int32](4), ptr.To[int32](2)
			cc.Spec.HighAvailability.ProbeTimeoutSeconds = 2
		}, []string{"\ncluster-node-timeout 2000\n"}, "replicas: 12\n"},
		{"no automatic failover", func(cc *cachev1alpha1.CacheCluster) {
			cc.Spec.HighAvailability.AutoFailover = ptr.To(false)
		}, []string{"\ncluster-replica-no-failover yes\n"}, "replicas: 6\n"},
		{"no replicas", func(cc *cachev1alpha1.CacheCluster) {
			cc.Spec.ReplicasPerShard = ptr.To[int32](0)
		}, []string{"\ncluster-enabled yes\n"}, "replicas: 3\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cc := loadExamples(t)["sharded"].DeepCopy()
			tt.mutate(cc)
			conf, sts, policy := render(cc)
			for _, want := range tt.wantConf {
				g.Expect(conf).To(ContainSubstring(want))
			}
			g.Expect(sts).To(ContainSubstring(tt.wantReplicas))
			g.Expect(sts).To(ContainSubstring("- --cluster-announce-ip\n        - $(POD_IP)\n"))
			g.Expect(sts).To(ContainSubstring("containerPort: 16379"))
			// The bus port is open to the cluster's own pods, which the
			// policy admits on every port; to no one else.
			g.Expect(policy).NotTo(ContainSubstring("16379"))
		})
	}

	g := NewWithT(t)
	conf, sts, policy := render(loadExamples(t)["basic"])
	g.Expect(conf).NotTo(ContainSubstring("cluster-"))
	g.Expect(sts).NotTo(ContainSubstring("cluster-announce-ip"))
	g.Expect(sts).NotTo(ContainSubstring("16379"))
	g.Expect(policy).NotTo(ContainSubstring("16379"))
}

// The cluster parameters day-two sets live are the ones redis.conf
// renders, as CONFIG GET reports them.
func TestClusterParameters(t *testing.T) {
	g := NewWithT(t)
	cc := &cachev1alpha1.CacheCluster{Spec: cachev1alpha1.CacheClusterSpec{Version: "7.0.15"}}
	g.Expect(ClusterParameters(cc)).To(BeNil())
	cc.Spec.Mode = cachev1alpha1.ModeSharded
	g.Expect(ClusterParameters(cc)).To(Equal(map[string]string{"cluster-node-timeout": "5000", "cluster-replica-no-failover": "no"}))
	cc.Spec.HighAvailability.ProbeTimeoutSeconds = 2
	cc.Spec.HighAvailability.AutoFailover = ptr.To(false)
	g.Expect(ClusterParameters(cc)).To(Equal(map[string]string{"cluster-node-timeout": "2000", "cluster-replica-no-failover": "yes"}))
}

// A sharded cluster restored from a sharded backup: the init container
// learns its pod's name (the ordinal names its shard and whether it is the
// shard's first pod), the ConfigMap the backup's folder, the shard count
// and the pods per shard; no S3 secret is needed for that.
func TestRenderShardedRestore(t *testing.T) {
	g := NewWithT(t)
	cc := loadExamples(t)["sharded"]
	cc.Spec.Restore = &cachev1alpha1.RestoreSpec{Key: "prod/default/sharded/sharded-1/",
		S3: &cachev1alpha1.S3Target{Endpoint: "s3.example.com", Bucket: "b", CredentialsSecret: "s3"}}
	objs, err := Render(cc, DefaultCapabilities())
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]map[string]any{}
	for _, o := range objs {
		byName[o.GetKind()+"/"+o.GetName()] = o.Object
	}
	data, _, _ := unstructured.NestedStringMap(byName["ConfigMap/sharded-restore"], "data")
	g.Expect(data).To(Equal(map[string]string{"state": "pending", "key": "prod/default/sharded/sharded-1/", "replace": "", "shards": "3", "podsPerShard": "2"}))
	inits, _, _ := unstructured.NestedSlice(byName["StatefulSet/sharded"], "spec", "template", "spec", "initContainers")
	g.Expect(inits).To(HaveLen(1))
	env := inits[0].(map[string]any)["env"]
	g.Expect(env).To(ContainElement(map[string]any{"name": "POD_NAME", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}}))
	g.Expect(env).To(ContainElement(HaveKeyWithValue("name", "AWS_ACCESS_KEY_ID")))

	// A replication cluster's restore gets neither.
	basic := loadExamples(t)["basic"]
	basic.Spec.Restore = &cachev1alpha1.RestoreSpec{Key: "prod/default/basic/b.rdb", S3: cc.Spec.Restore.S3}
	objs, err = Render(basic, DefaultCapabilities())
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == "basic-restore" {
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			g.Expect(data).NotTo(HaveKey("shards"))
		}
		if o.GetKind() == "StatefulSet" && o.GetName() == "basic" {
			inits, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "initContainers")
			g.Expect(inits[0].(map[string]any)["env"]).NotTo(ContainElement(HaveKeyWithValue("name", "POD_NAME")))
		}
	}
}
