package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/test/crdtest"
)

// One team's manifest must never hurt another team's cluster. These are the
// inputs that used to: each gets a message a person can act on.
func TestAdmissionRefusesNamesAndConfigThatWouldHurtOthers(t *testing.T) {
	ns := newNamespace(t)
	long := func(n int) string { return "c" + strings.Repeat("a", n-1) }
	tests := []struct {
		name, objName, spec, wantErr string
	}{
		{"a name another cluster's read Service uses", "col-read", `version: '7.0.15'`,
			`metadata.name must not end in -read, -headless, -config, -restore, -auth, -backup-store or -precheck: the operator appends these to cluster names, so such a name would collide with another cluster's objects`},
		{"a name another cluster's Secret uses", "col-auth", `version: '7.0.15'`, `metadata.name must not end in -read`},
		{"a name another cluster's backup store uses", "col-backup-store", `version: '7.0.15'`, `metadata.name must not end in -read`},
		{"53 characters", long(53), `version: '7.0.15'`,
			`metadata.name must be at most 52 characters: the StatefulSet's pods carry the name and an 11-character revision hash in a label limited to 63 characters`},
		{"62 characters", long(62), `version: '7.0.15'`, `metadata.name must be at most 52 characters`},
		{"40 characters with a claim target", long(40), "version: '7.0.15'\nbackup: {pvc: {claimName: b}}",
			`metadata.name must be at most 39 characters with a claim target (backup.pvc or restore.pvc)`},
		{"a name that starts with a digit", "1cache", `version: '7.0.15'`,
			`metadata.name must start with a letter and hold only lower-case letters, digits and '-': it names the cluster's Services, which must be DNS-1035 labels`},
		{"a name with a dot", "my.cache", `version: '7.0.15'`, `metadata.name must start with a letter`},
		{"retention in words", "c1", "version: '7.0.15'\nbackup: {retention: {maxAge: a week}}", `spec.backup.retention.maxAge in body should match`},
		{"retention of zero", "c1", "version: '7.0.15'\nbackup: {retention: {maxAge: 0d}}", `a duration must be longer than zero, e.g. 7d, 168h or 90m`},
		{"retention with a fraction", "c1", "version: '7.0.15'\nbackup: {retention: {maxAge: 1.5h}}", `spec.backup.retention.maxAge in body should match`},
		{"maxmemory: lots", "c1", "version: '7.0.15'\nconfig: {maxmemory: lots}",
			`config maxmemory must be a memory size: a whole number with an optional unit b, k, kb, m, mb, g or gb, such as 256mb`},
		{"maxmemory 1.5gb", "c1", "version: '7.0.15'\nconfig: {maxmemory: 1.5gb}", `config maxmemory must be a memory size`},
		{"maxmemory-policy: delete-everything", "c1", "version: '7.0.15'\nconfig: {maxmemory-policy: delete-everything}",
			`config maxmemory-policy must be one of: volatile-lru, allkeys-lru, volatile-lfu, allkeys-lfu, volatile-random, allkeys-random, volatile-ttl, noeviction`},
		{"maxmemory above the memory limit", "c1", "version: '7.0.15'\nresources: {limits: {memory: 1Gi}}\nconfig: {maxmemory: 16gb}",
			`config maxmemory 16gb does not fit in resources.limits.memory 1Gi: Redis needs a quarter of the limit for buffers and the copy-on-write pages of a background save, so maxmemory may be at most 75% of the limit`},
		{"maxmemory without headroom", "c1", "version: '7.0.15'\nresources: {limits: {memory: 1Gi}}\nconfig: {maxmemory: 900mb}", `config maxmemory 900mb does not fit in resources.limits.memory 1Gi`},
		{"a parameter cacheops does not support", "c1", "version: '7.0.15'\nconfig: {loadmodule: /tmp/evil.so}",
			`config key loadmodule is not a Redis parameter cacheops supports; docs/api.md lists the supported ones`},
		{"a misspelt parameter", "c1", "version: '7.0.15'\nconfig: {max-memory: 1gb}", `config key max-memory is not a Redis parameter cacheops supports`},
		{"the debug command", "c1", "version: '7.0.15'\nconfig: {enable-debug-command: 'yes'}", `config key enable-debug-command is not a Redis parameter cacheops supports`},
		{"a boolean that is not yes or no", "c1", "version: '7.0.15'\nconfig: {appendonly: 'true'}", `config appendonly must be yes or no`},
		{"hz out of range", "c1", "version: '7.0.15'\nconfig: {hz: '1000'}", `config hz must be a whole number from 1 to 500`},
		{"a timeout in words", "c1", "version: '7.0.15'\nconfig: {timeout: five}", `config timeout must be a whole number from 0 to 2147483647`},
		{"an empty value", "c1", "version: '7.0.15'\nconfig: {save: ''}", `config save has an empty value; write two double quotes for an empty string, as in redis.conf`},
		{"save in words", "c1", "version: '7.0.15'\nconfig: {save: every hour}", `save must be "" (no snapshots) or pairs of seconds and changes, such as 3600 1 300 100`},
		{"keyspace events with an unknown class", "c1", "version: '7.0.15'\nconfig: {notify-keyspace-events: Exq}", `notify-keyspace-events must be "" or letters of KEg$lshzxetmdnA`},
		{"output buffer limit of an unknown class", "c1", "version: '7.0.15'\nconfig: {client-output-buffer-limit: master 1mb 1mb 60}", `client-output-buffer-limit must be groups of class`},
		{"a cpu limit with a huge exponent", "c1", "version: '7.0.15'\nresources: {limits: {cpu: 1e9999999999}}", `spec.resources.limits.cpu in body should match '^[0-9]{1,18}([.][0-9]{1,9})?([KMGTPE]i|[numkMGTPE])?$'`},
		{"a memory request with a fractional exponent", "c1", "version: '7.0.15'\nresources: {requests: {memory: 1e.5}}", `spec.resources.requests.memory in body should match`},
		{"a storage size with a huge negative exponent", "c1", "version: '7.0.15'\nstorage: {size: 1e-2147483647}", `storage.size must be a positive quantity such as 1Gi: a plain number with an optional suffix (Ki, Mi, Gi, Ti, ...), no exponent`},
		{"a password key that is not a Secret key", "c1", "version: '7.0.15'\nauth: {secretRef: {name: pw, key: '{{'}}", `spec.auth.secretRef.key in body should match`},
		{"a CA Secret that is not a name", "c1", "version: '7.0.15'\nbackup: {s3: {endpoint: s3.example.com, bucket: b1b, credentialsSecret: c, caSecret: 'BcMnnpjc:'}}", `spec.backup.s3.caSecret in body should match`},
		{"an empty restore key", "c1", "version: '7.0.15'\nrestore: {key: '', s3: {endpoint: s3.example.com, bucket: b1b, credentialsSecret: c}}", `spec.restore.key in body should be at least 1 chars long`},
		{"a restore key with a control character", "c1", "version: '7.0.15'\nrestore: {key: \"a\\u0000b\", s3: {endpoint: s3.example.com, bucket: b1b, credentialsSecret: c}}", `spec.restore.key in body should match`},
		{"an operator-owned parameter", "c1", "version: '7.0.15'\nconfig: {replicaof: 'other 6379'}", `config key replicaof is managed by the operator and cannot be set in spec.config`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(context.Background(), unstructuredCC(g, ns, tt.objName, tt.spec), client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tt.wantErr))
		})
	}
}

// What admission lets through on purpose.
func TestAdmissionAcceptsWhatIsSafe(t *testing.T) {
	ns := newNamespace(t)
	tests := []struct{ name, objName, spec string }{
		{"52 characters", "c" + strings.Repeat("a", 51), `version: '7.0.15'`},
		{"39 characters with a claim", "c" + strings.Repeat("a", 38), "version: '7.0.15'\nbackup: {pvc: {claimName: b}}"},
		{"a suffix inside the name", "read-cache", `version: '7.0.15'`},
		{"retention in days", "c1", "version: '7.0.15'\nbackup: {retention: {maxAge: 7d}}"},
		{"retention in days and hours", "c1", "version: '7.0.15'\nbackup: {retention: {maxAge: 1d12h}}"},
		{"maxmemory at 75 % of the limit", "c1", "version: '7.0.15'\nresources: {limits: {memory: 1Gi}}\nconfig: {maxmemory: 768mb}"},
		{"maxmemory with a limit in bytes", "c1", "version: '7.0.15'\nresources: {limits: {memory: 2147483648}}\nconfig: {maxmemory: 1GB}"},
		{"maxmemory without a limit", "c1", "version: '7.0.15'\nconfig: {maxmemory: 16gb}"},
		{"no snapshots", "c1", "version: '7.0.15'\nconfig: {save: '\"\"'}"},
		{"snapshot pairs", "c1", "version: '7.0.15'\nconfig: {save: 3600 1 300 100}"},
		{"a claim named with digits only", "c1", "version: '7.0.15'\nbackup: {pvc: {claimName: '8'}}"},
		{"a password Secret named with digits only", "c1", "version: '7.0.15'\nauth: {secretRef: {name: '8', key: '1'}}"},
		{"quantities as plain numbers", "c1", "version: '7.0.15'\nresources: {requests: {cpu: '0.5', memory: 1073741824}, limits: {cpu: 2, memory: 2Gi}}"},
		{"an output buffer limit", "c1", "version: '7.0.15'\nconfig: {client-output-buffer-limit: replica 256mb 64mb 60 pubsub 32mb 8mb 60}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(k8s.Create(context.Background(), unstructuredCC(g, ns, tt.objName, tt.spec), client.DryRunAll)).To(Succeed())
		})
	}
}

// Every parameter of the allow-list takes a good value and refuses a bad
// one: the Go table (used by docs and the operator) and the CRD's CEL rules
// say the same.
func TestEverySupportedParameterHasAValueRule(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	special := map[string][2]string{
		"save":                       {"900 1", "sometimes"},
		"notify-keyspace-events":     {"Ex", "?"},
		"client-output-buffer-limit": {"normal 0 0 0", "normal"},
		"maxmemory-clients":          {"10%", "ten"},
		"appendfilename":             {"appendonly.aof", "../x"},
	}
	for key, kind := range cachev1alpha1.ConfigParameters {
		var good, bad string
		switch kind {
		case cachev1alpha1.ConfigMemory:
			good, bad = "64mb", "64 megabytes"
		case cachev1alpha1.ConfigBool:
			good, bad = "no", "off"
		case cachev1alpha1.ConfigInt:
			r, ok := cachev1alpha1.ConfigRanges[key]
			g.Expect(ok).To(BeTrue(), "%s has no range", key)
			good, bad = fmt.Sprint(r[0]), fmt.Sprint(r[1]+1)
			if r[1] == 2147483647 {
				bad = "a lot"
			}
		case cachev1alpha1.ConfigEnum:
			words, ok := cachev1alpha1.ConfigEnums[key]
			g.Expect(ok).To(BeTrue(), "%s has no words", key)
			good, bad = words[0], "none-of-these"
		case cachev1alpha1.ConfigSpecial:
			v, ok := special[key]
			g.Expect(ok).To(BeTrue(), "%s has no test values", key)
			good, bad = v[0], v[1]
		}
		spec := fmt.Sprintf("version: '7.0.15'\nconfig: {%s: '%s'}", key, good)
		g.Expect(k8s.Create(context.Background(), unstructuredCC(g, ns, "c1", spec), client.DryRunAll)).To(Succeed(), "%s: %s", key, good)
		spec = fmt.Sprintf("version: '7.0.15'\nconfig: {%s: '%s'}", key, bad)
		err := k8s.Create(context.Background(), unstructuredCC(g, ns, "c1", spec), client.DryRunAll)
		g.Expect(err).To(MatchError(ContainSubstring(key)), "%s: %s must be refused", key, bad)
	}
}

func unstructuredCC(g Gomega, ns, name, specYAML string) *unstructured.Unstructured {
	spec := map[string]any{}
	g.Expect(yaml.Unmarshal([]byte(specYAML), &spec)).To(Succeed())
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.cacheops.io/v1alpha1",
		"kind":       "CacheCluster",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       spec,
	}}
}

// An object stored under an older, looser CRD does not decode into today's
// types. It must not blind the operator: the others are reconciled as
// usual, the bad one is reported, and its deletion completes.
func TestAnUndecodableClusterDoesNotStopTheOthers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.cacheops.io/v1alpha1", "kind": "CacheCluster",
		"metadata": map[string]any{"name": "legacy", "namespace": ns, "finalizers": []any{cachev1alpha1.Finalizer}},
		"spec":     crdtest.Undecodable(),
	}}
	g.Expect(crdtest.CreateUndecodable(ctx, testEnv.Config, bad, timeout)).To(Succeed())

	good := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, good)).To(Succeed())
	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "basic"}, &appsv1.StatefulSet{})
	}, timeout, interval).Should(Succeed(), "the valid cluster beside the undecodable one gets its StatefulSet")

	got := &cachev1alpha1.CacheCluster{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, got)).To(Succeed())
		g.Expect(got.DecodeError).To(ContainSubstring(crdtest.UndecodableField))
		g.Expect(hasEvent(g, ns, "legacy", cachev1alpha1.ReasonDecodeFailed, crdtest.UndecodableField)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	// Nothing was rendered for it.
	g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, &appsv1.StatefulSet{}))).To(BeTrue())
	// The status is written where the API server lets it be.
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(cachev1alpha1.GroupVersion.WithKind("CacheCluster"))
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, raw)).To(Succeed())
		conds, _, _ := unstructured.NestedSlice(raw.Object, "status", "conditions")
		found := false
		for _, c := range conds {
			m := c.(map[string]any)
			if m["type"] == cachev1alpha1.ConditionStalled && m["reason"] == cachev1alpha1.ReasonDecodeFailed && strings.Contains(fmt.Sprint(m["message"]), crdtest.UndecodableField) {
				found = true
			}
		}
		g.Expect(found).To(BeTrue(), "Stalled DecodeFailed naming the field in %v", conds)
	}, timeout, interval).Should(Succeed())

	g.Expect(k8s.Delete(ctx, got)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, &cachev1alpha1.CacheCluster{}))
	}, timeout, interval).Should(BeTrue(), "the deletion of an undecodable cluster completes")
}

func hasEvent(g Gomega, ns, name, reason, contains string) bool {
	list := &corev1.EventList{}
	g.Expect(k8s.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason && strings.Contains(e.Message, contains) {
			return true
		}
	}
	return false
}

// A rendered name that another owner's object already has: nothing is
// applied, the object is not touched, and Stalled says who owns it.
func TestAnObjectOwnedBySomeoneElseIsNeverTakenOver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	other := loadExample(t, "basic", ns)
	other.Name, other.Spec.Paused = "other", true
	g.Expect(k8s.Create(ctx, other)).To(Succeed())
	theirs := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-read", Labels: map[string]string{
			cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue, cachev1alpha1.LabelCluster: "other"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 6379}}, Selector: map[string]string{"app": "theirs"}},
	}
	g.Expect(ctrlSetOwner(other, theirs)).To(Succeed())
	g.Expect(k8s.Create(ctx, theirs)).To(Succeed())
	// And a Secret a person made, with the name of the generated password.
	theirSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-auth"}, StringData: map[string]string{"token": "x"}}
	g.Expect(k8s.Create(ctx, theirSecret)).To(Succeed())

	web := loadExample(t, "basic", ns)
	web.Name = "web"
	g.Expect(k8s.Create(ctx, web)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := getCC(g, web)
		stalled := condition(got, cachev1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(cachev1alpha1.ReasonNameConflict))
		g.Expect(stalled.Message).To(ContainSubstring("Secret web-auth exists and was not created by cacheops for this cluster"))
		g.Expect(condition(got, cachev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
	}, timeout, interval).Should(Succeed())
	secret := &corev1.Secret{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(theirSecret), secret)).To(Succeed())
	g.Expect(secret.Data).NotTo(HaveKey("password"), "no password is written into someone else's Secret")

	// With the Secret out of the way, the Service is the conflict.
	g.Expect(k8s.Delete(ctx, theirSecret)).To(Succeed())
	poke(g, web) // rather than wait for the stalled retry
	g.Eventually(func(g Gomega) {
		stalled := condition(getCC(g, web), cachev1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Message).To(ContainSubstring("Service web-read is controlled by CacheCluster other"))
	}, timeout, interval).Should(Succeed())
	svc := &corev1.Service{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(theirs), svc)).To(Succeed())
	g.Expect(svc.Spec.Selector).To(Equal(map[string]string{"app": "theirs"}), "the other cluster's Service is untouched")
	g.Expect(svc.ResourceVersion).To(Equal(theirs.ResourceVersion))
	for _, c := range []struct {
		name string
		obj  client.Object
	}{{"web", &appsv1.StatefulSet{}}, {"web", &corev1.Service{}}, {"web-config", &corev1.ConfigMap{}}} {
		g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.name}, c.obj))).To(BeTrue(), "%T %s must not be applied", c.obj, c.name)
	}
}

func ctrlSetOwner(owner *cachev1alpha1.CacheCluster, obj metav1.Object) error {
	got := &cachev1alpha1.CacheCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(owner), got); err != nil {
		return err
	}
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: cachev1alpha1.GroupVersion.String(), Kind: "CacheCluster",
		Name: got.Name, UID: got.UID, Controller: ptr.To(true)}})
	return nil
}

// An object the API server refuses outside the dry run (here: a quota)
// shows in Ready with the API server's words; observedGeneration does not
// move.
func TestAnApplyErrorIsInTheStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-services"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}},
	}
	g.Expect(k8s.Create(ctx, quota)).To(Succeed())
	// Admission charges against the quota's status, which the quota
	// controller (not run here) would write.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}}
	g.Expect(k8s.Status().Update(ctx, quota)).To(Succeed())
	cc := loadExample(t, "basic", ns)
	g.Expect(k8s.Create(ctx, cc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := getCC(g, cc)
		ready := condition(got, cachev1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(cachev1alpha1.ReasonApplyFailed))
		g.Expect(ready.Message).To(ContainSubstring("forbidden"))
		g.Expect(got.Status.Phase).NotTo(BeEmpty())
		g.Expect(got.Status.ObservedGeneration).To(BeZero())
	}, timeout, interval).Should(Succeed())
}
