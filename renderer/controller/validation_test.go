package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// The API server, not the operator, refuses bad input: each case is a
// manifest a person might write and the message they get back.
func TestAdmissionRejectsInvalidCacheClusters(t *testing.T) {
	ns := newNamespace(t)
	tests := []struct {
		name    string
		spec    string
		wantErr string
	}{
		{"no version", `replicas: 3`, `spec.version: Required value`},
		{"version not a version", `version: latest`, `spec.version: Invalid value: "latest": spec.version in body should match`},
		{"zero replicas", "version: '7.0.15'\nreplicas: 0", `spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1`},
		{"too many replicas", "version: '7.0.15'\nreplicas: 16", `spec.replicas: Invalid value: 16: spec.replicas in body should be less than or equal to 15`},
		{"zero storage", "version: '7.0.15'\nstorage: {size: '0'}", `storage.size must be a positive quantity such as 1Gi`},
		{"negative storage", "version: '7.0.15'\nstorage: {size: -1Gi}", `storage.size must be a positive quantity such as 1Gi`},
		{"storage not a quantity", "version: '7.0.15'\nstorage: {size: lots}", `spec.storage.size`},
		{"owned config key replicaof", "version: '7.0.15'\nconfig: {replicaof: 'other 6379'}", `config key replicaof is managed by the operator and cannot be set in spec.config`},
		{"owned config key requirepass", "version: '7.0.15'\nconfig: {requirepass: x, maxmemory: 1gb}", `config key requirepass is managed by the operator`},
		{"owned config key port", "version: '7.0.15'\nconfig: {port: '7000'}", `config key port is managed by the operator`},
		{"owned config key dir", "version: '7.0.15'\nconfig: {dir: /tmp}", `config key dir is managed by the operator`},
		{"upper-case config key", "version: '7.0.15'\nconfig: {MaxMemory: 1gb}", `config keys must be lower-case Redis parameter names`},
		{"multi-line config value", "version: '7.0.15'\nconfig: {maxmemory: \"1gb\\nreplicaof evil 6379\"}", `config values must be a single line`},
		{"probe timeout zero", "version: '7.0.15'\nhighAvailability: {probeTimeoutSeconds: 0}", `spec.highAvailability.probeTimeoutSeconds: Invalid value: 0`},
		{"probe timeout too long", "version: '7.0.15'\nhighAvailability: {probeTimeoutSeconds: 61}", `should be less than or equal to 60`},
		{"unknown service type", "version: '7.0.15'\nnetwork: {serviceType: Ingress}", `spec.network.serviceType: Unsupported value: "Ingress"`},
		{"backup without schedule", "version: '7.0.15'\nbackup: {enabled: true}", `backup.schedule is required when backup.enabled is true`},
		{"backup schedule not cron", "version: '7.0.15'\nbackup: {enabled: true, schedule: every day}", `backup.schedule must be a cron expression with five fields`},
		{"empty retention", "version: '7.0.15'\nbackup: {retention: {}}", `backup.retention needs count, maxAge or both`},
		{"backup enabled without a target", "version: '7.0.15'\nbackup: {enabled: true, schedule: '@daily'}", `backup.enabled needs a target: set backup.s3 or backup.pvc`},
		{"s3 endpoint as a URL", "version: '7.0.15'\nbackup: {s3: {endpoint: 'https://s3.example.com/', bucket: b1b, credentialsSecret: c}}", `spec.backup.s3.endpoint in body should match`},
		{"s3 prefix with ..", "version: '7.0.15'\nbackup: {s3: {endpoint: s3.example.com, bucket: b1b, prefix: '../x', credentialsSecret: c}}", `backup.s3.prefix must not start with / or contain ..`},
		{"restore from both", "version: '7.0.15'\nrestore: {backup: b, key: k, s3: {endpoint: s3.example.com, bucket: b1b, credentialsSecret: c}}", `restore needs exactly one of backup (a CacheBackup name) or key`},
		{"restore key without bucket", "version: '7.0.15'\nrestore: {key: k}", `restore.key needs restore.s3`},
		{"two backup targets", "version: '7.0.15'\nbackup: {pvc: {claimName: b}, s3: {endpoint: s3.example.com, bucket: b1b, credentialsSecret: c}}", `backup needs one target: set backup.s3 or backup.pvc, not both`},
		{"pvc prefix with ..", "version: '7.0.15'\nbackup: {pvc: {claimName: b, prefix: 'a/../../x'}}", `pvc.prefix must not start with /, contain //, or have a part that starts with .`},
		{"pvc prefix with a hidden part", "version: '7.0.15'\nbackup: {pvc: {claimName: b, prefix: 'a/.x/'}}", `pvc.prefix must not start with /, contain //, or have a part that starts with .`},
		{"restore key in two places", "version: '7.0.15'\nrestore: {key: k, pvc: {claimName: b}, s3: {endpoint: s3.example.com, bucket: b1b, credentialsSecret: c}}", `restore.key is in one place: set restore.s3 or restore.pvc, not both`},
		{"bad claim name", "version: '7.0.15'\nbackup: {pvc: {claimName: My_Claim}}", `spec.backup.pvc.claimName in body should match`},
		{"bad secret name", "version: '7.0.15'\nauth: {secretRef: {name: My_Secret}}", `spec.auth.secretRef.name in body should match`},
		{"a redis version cacheops does not support", "version: '7.2.4'", `engine redis version 7.2.4 is not supported; supported: redis 6.2.14, redis 7.0.15, valkey 8.0.1 (docs/engines.md)`},
		{"a short version", "version: '7.0'", `engine redis version 7.0 is not supported`},
		{"valkey under a redis version", "engine: valkey\nversion: '7.0.15'", `engine valkey version 7.0.15 is not supported`},
		{"an unknown engine", "engine: keydb\nversion: '7.0.15'", `spec.engine: Unsupported value: "keydb": supported values: "redis", "valkey"`},
		{"a parameter redis 6.2 does not have", "version: '6.2.14'\nconfig: {maxmemory-clients: 10%}", `redis 6.2.14 has no parameter maxmemory-clients; remove it from spec.config or choose a newer version`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(context.Background(), unstructuredCC(g, ns, "bad", tt.spec))
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tt.wantErr))
		})
	}
}

// Every row of the engine table is admitted, with the engine defaulted.
func TestAdmissionAcceptsEveryEngineVersion(t *testing.T) {
	ns := newNamespace(t)
	for i, ev := range cachev1alpha1.EngineVersions {
		t.Run(ev.String(), func(t *testing.T) {
			g := NewWithT(t)
			spec := "version: '" + ev.Version + "'\npaused: true"
			if ev.Engine != cachev1alpha1.EngineRedis {
				spec += "\nengine: " + string(ev.Engine)
			}
			obj := unstructuredCC(g, ns, "ok"+string(rune('a'+i)), spec)
			g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())
			got := &cachev1alpha1.CacheCluster{}
			g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), got)).To(Succeed())
			g.Expect(got.Spec.Engine).To(Equal(ev.Engine))
		})
	}
}

func TestAdmissionKeepsStorageClassImmutable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cc := loadExample(t, "basic", ns)
	cc.Spec.Paused = true // keep the controller out of this test
	cc.Spec.Storage.ClassName = ptr.To("fast")
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())

	// Merge patches carry no resourceVersion, so only validation can refuse them.
	change := func(mutate func(*cachev1alpha1.CacheCluster)) error {
		got := getCC(g, cc)
		patch := client.MergeFrom(got.DeepCopy())
		mutate(got)
		return k8s.Patch(ctx, got, patch)
	}
	g.Expect(change(func(c *cachev1alpha1.CacheCluster) { c.Spec.Storage.ClassName = ptr.To("slow") })).
		To(MatchError(ContainSubstring("storage.className is immutable")))
	g.Expect(change(func(c *cachev1alpha1.CacheCluster) { c.Spec.Storage.ClassName = nil })).
		To(MatchError(ContainSubstring("storage.className is immutable")))
	// Other storage fields may change.
	g.Expect(change(func(c *cachev1alpha1.CacheCluster) { c.Spec.Storage.RetainOnDelete = true })).To(Succeed())
}

func TestAdmissionKeepsRestoreImmutable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	plain := loadExample(t, "basic", ns)
	plain.Spec.Paused = true
	g.Expect(k8s.Create(ctx, plain)).To(Succeed())
	restored := loadExample(t, "basic", ns)
	restored.Name, restored.Spec.Paused = "restored", true
	restored.Spec.Restore = &cachev1alpha1.RestoreSpec{Backup: "basic-1"}
	g.Expect(k8s.Create(ctx, restored)).To(Succeed())

	change := func(cc *cachev1alpha1.CacheCluster, mutate func(*cachev1alpha1.CacheCluster)) error {
		got := getCC(g, cc)
		patch := client.MergeFrom(got.DeepCopy())
		mutate(got)
		return k8s.Patch(ctx, got, patch)
	}
	const msg = "spec.restore is immutable"
	g.Expect(change(plain, func(c *cachev1alpha1.CacheCluster) { c.Spec.Restore = &cachev1alpha1.RestoreSpec{Backup: "x"} })).To(MatchError(ContainSubstring(msg)))
	g.Expect(change(restored, func(c *cachev1alpha1.CacheCluster) { c.Spec.Restore.Backup = "basic-2" })).To(MatchError(ContainSubstring(msg)))
	g.Expect(change(restored, func(c *cachev1alpha1.CacheCluster) { c.Spec.Restore = nil })).To(MatchError(ContainSubstring(msg)))
	g.Expect(change(restored, func(c *cachev1alpha1.CacheCluster) { c.Spec.Replicas = ptr.To[int32](2) })).To(Succeed())
}
