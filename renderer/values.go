package renderer

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// Defaults that the CRD applies at admission. Values applies them again so a
// manifest read from a file (the CLI, tests) renders exactly like the same
// manifest after it passed through the API server.
const (
	DefaultReplicas            = 3
	DefaultStorageSize         = "1Gi"
	DefaultProbeTimeoutSeconds = 5
	DefaultSecretKey           = "password"
	// ImageRepository is the image used when spec.image is unset.
	ImageRepository = "redis"
)

// RestoreImage is the image of the init container that downloads a dump
// into a restored cluster's pods: the operator's own image (its manager
// binary has a restore subcommand). The manager sets it from
// --restore-image.
var RestoreImage = "ghcr.io/cacheops/cacheops-manager:0.1.0"

// OperatorIdentity says where the operator's pods run, for the
// NetworkPolicies that admit them: the namespace and the labels of its pods.
type OperatorIdentity struct {
	Namespace string
	PodLabels map[string]string
}

// Operator is the operator the rendered NetworkPolicies admit. The manager
// sets it from --operator-namespace and --operator-pod-labels, which the
// install chart fills with its release namespace and the manager's pod
// labels (its release among them); the default is the manager pods of any
// release of the chart in cacheops-system.
var Operator = OperatorIdentity{
	Namespace: "cacheops-system",
	PodLabels: map[string]string{
		"app.kubernetes.io/name":      "cacheops",
		"app.kubernetes.io/component": "manager",
	},
}

// networkPolicyValues: the operator's namespace and pod labels, and the
// NetworkPolicy peers of spec.network.allowedClients (unset: every pod of
// the cluster's namespace).
func networkPolicyValues(cc *cachev1alpha1.CacheCluster) (map[string]any, error) {
	if Operator.Namespace == "" || len(Operator.PodLabels) == 0 {
		return nil, fmt.Errorf("the operator's namespace and pod labels are not set (--operator-namespace, --operator-pod-labels)")
	}
	podLabels := map[string]any{}
	for k, v := range Operator.PodLabels {
		podLabels[k] = v
	}
	clients := []any{map[string]any{"podSelector": map[string]any{}}}
	if ac := cc.Spec.Network.AllowedClients; len(ac) > 0 {
		clients = []any{}
		for i := range ac {
			// The CRD cannot check a selector's operators and values; a bad
			// one stalls the cluster with this message instead of reaching
			// the API server in a NetworkPolicy.
			if _, err := metav1.LabelSelectorAsSelector(ac[i].PodSelector); err != nil {
				return nil, fmt.Errorf("spec.network.allowedClients[%d].podSelector: %w", i, err)
			}
			if _, err := metav1.LabelSelectorAsSelector(ac[i].NamespaceSelector); err != nil {
				return nil, fmt.Errorf("spec.network.allowedClients[%d].namespaceSelector: %w", i, err)
			}
			peer, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ac[i])
			if err != nil {
				return nil, fmt.Errorf("spec.network.allowedClients[%d]: %w", i, err)
			}
			clients = append(clients, peer)
		}
	}
	return map[string]any{
		"enabled":        true,
		"operator":       map[string]any{"namespace": Operator.Namespace, "podLabels": podLabels},
		"allowedClients": clients,
	}, nil
}

// RestoreLocation is the dump a cluster restores: status.restoreFrom once
// the operator resolved spec.restore or started a disaster recovery, or
// spec.restore's key and bucket (which need no resolving). Nil when there
// is nothing to restore or it is not resolved yet.
func RestoreLocation(cc *cachev1alpha1.CacheCluster) *cachev1alpha1.BackupLocation {
	if cc.Status.RestoreFrom != nil {
		return cc.Status.RestoreFrom
	}
	if r := cc.Spec.Restore; r != nil && r.Key != "" && (r.S3 != nil || r.PVC != nil) {
		return &cachev1alpha1.BackupLocation{S3: r.S3, PVC: r.PVC, Key: r.Key}
	}
	return nil
}

// restoreValues are the values of the restore init container and its
// ConfigMap: present for a cluster created from a backup and for one that
// restores itself after a disaster (spec.backup.autoRestore). The bucket
// is in the pod template; which dump, and whether one is to be restored
// at all, are in the ConfigMap, so a disaster recovery restarts no pod
// through its template.
func restoreValues(cc *cachev1alpha1.CacheCluster) (map[string]any, error) {
	loc := RestoreLocation(cc)
	if loc == nil && cc.Spec.Restore != nil {
		return nil, fmt.Errorf("spec.restore.backup %q is not resolved to a stored dump yet", cc.Spec.Restore.Backup)
	}
	var from cachev1alpha1.BackupLocation
	switch {
	case loc != nil:
		from = *loc
	case cc.Spec.Backup.AutoRestore && (cc.Spec.Backup.S3 != nil || cc.Spec.Backup.PVC != nil):
		from = cachev1alpha1.BackupLocation{S3: cc.Spec.Backup.S3, PVC: cc.Spec.Backup.PVC}
	default:
		return map[string]any{"enabled": false}, nil
	}
	op := cc.Status.Operation
	recovering := op != nil && op.Type == cachev1alpha1.OperationRestore
	// Once day-two has checked the restored master, new pods (scale-up, a
	// lost volume) get their data by replication: the init container skips
	// the download, so a dump removed from the bucket later does not keep
	// them from starting.
	pending := recovering || (cc.Spec.Restore != nil && meta.FindStatusCondition(cc.Status.Conditions, cachev1alpha1.ConditionRestored) == nil)
	replace := ""
	if recovering {
		replace = op.ID
	}
	values := map[string]any{
		"enabled": true,
		"image":   RestoreImage,
		"key":     from.Key,
		"done":    !pending,
		"replace": replace,
	}
	switch {
	case from.S3 != nil:
		t := from.S3
		values["endpoint"], values["bucket"], values["region"], values["insecure"] = t.Endpoint, t.Bucket, t.Region, t.Insecure
		values["credentialsSecret"], values["caSecret"] = t.CredentialsSecret, t.CASecret
	case from.PVC != nil:
		values["claim"] = from.PVC.ClaimName
	default:
		return nil, fmt.Errorf("the restore location %q names neither a bucket nor a claim", from.Key)
	}
	return values, nil
}

// BackupStoreName is the StatefulSet (and, with -0, the pod) that serves a
// PersistentVolumeClaim backup target to the operator.
func BackupStoreName(cc *cachev1alpha1.CacheCluster) string {
	return cc.Name + "-backup-store"
}

// ClaimFolder is where a cluster's backups go on its backup claim:
// <prefix><namespace>/<cluster>/. Its backup-store pod serves only this.
func ClaimFolder(cc *cachev1alpha1.CacheCluster) string {
	ns := cc.Namespace
	if ns == "" {
		ns = corev1.NamespaceDefault
	}
	prefix := ""
	if pvc := cc.Spec.Backup.PVC; pvc != nil {
		prefix = pvc.Prefix
	}
	return prefix + path.Join(ns, cc.Name) + "/"
}

// backupStoreValues: the backup-store pod exists while spec.backup.pvc is
// set, serving (read and write) only the cluster's own folder on the claim;
// and while a restore from a claim is pending, serving only the dump (and
// its metadata) read only: the operator reads the metadata through it to
// check the restored master. A disaster recovery from the cluster's own
// folder keeps the read-write store.
func backupStoreValues(cc *cachev1alpha1.CacheCluster, restore map[string]any) map[string]any {
	claim, keyPrefix, readOnly := "", "", false
	if pvc := cc.Spec.Backup.PVC; pvc != nil {
		claim, keyPrefix = pvc.ClaimName, ClaimFolder(cc)
	}
	if c, _ := restore["claim"].(string); c != "" && restore["done"] == false {
		key, _ := restore["key"].(string)
		if c != claim || !strings.HasPrefix(key, keyPrefix) {
			claim, keyPrefix, readOnly = c, key, true
		}
	}
	if claim == "" {
		return map[string]any{"enabled": false}
	}
	return map[string]any{"enabled": true, "image": RestoreImage, "claim": claim, "keyPrefix": keyPrefix, "readOnly": readOnly}
}

// AuthSecretName is the name of the Secret that holds the generated password
// when spec.auth.secretRef is unset.
func AuthSecretName(cc *cachev1alpha1.CacheCluster) string {
	return cc.Name + "-auth"
}

// Values turns a CacheCluster into the values of the cachecluster chart. It is
// a pure function: the same CacheCluster always gives the same values, and
// nothing outside its argument is read.
func Values(cc *cachev1alpha1.CacheCluster) (map[string]any, error) {
	if cc.Name == "" {
		return nil, fmt.Errorf("metadata.name is empty")
	}
	if cc.Spec.Version == "" {
		return nil, fmt.Errorf("spec.version is empty")
	}
	if r := cc.Status.Rollout; r != nil && r.Version == "" {
		return nil, fmt.Errorf("status.rollout.version is empty")
	}
	// spec is checked even while the pods run approved values: a spec
	// that no version can run stalls before day-two tries it.
	if _, err := engineVersionOf(SpecValues(cc)); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	namespace := cc.Namespace
	if namespace == "" {
		namespace = corev1.NamespaceDefault
	}

	size := resource.MustParse(DefaultStorageSize)
	if cc.Spec.Storage.Size != nil {
		size = *cc.Spec.Storage.Size
	}
	if size.Sign() <= 0 {
		return nil, fmt.Errorf("spec.storage.size must be positive, got %s", size.String())
	}
	storage := map[string]any{
		"size":           size.String(),
		"retainOnDelete": cc.Spec.Storage.RetainOnDelete,
	}
	if cc.Spec.Storage.ClassName != nil {
		storage["className"] = *cc.Spec.Storage.ClassName
	}

	serviceType := cc.Spec.Network.ServiceType
	if serviceType == "" {
		serviceType = corev1.ServiceTypeClusterIP
	}

	auth := map[string]any{
		"secretName": AuthSecretName(cc),
		"secretKey":  DefaultSecretKey,
		"generated":  true,
	}
	if ref := cc.Spec.Auth.SecretRef; ref != nil {
		key := ref.Key
		if key == "" {
			key = DefaultSecretKey
		}
		auth = map[string]any{"secretName": ref.Name, "secretKey": key, "generated": false}
	}

	probeTimeout := cc.Spec.HighAvailability.ProbeTimeoutSeconds
	if probeTimeout == 0 {
		probeTimeout = DefaultProbeTimeoutSeconds
	}

	// What the pods run comes from the values day-two approved (spec,
	// until it approved something).
	approved := Approved(cc)
	ev, err := engineVersionOf(approved)
	if err != nil {
		return nil, err
	}
	config := map[string]any{}
	for k, v := range approved.Config {
		if old, ok := ev.Renamed[k]; ok {
			k = old
		}
		config[k] = string(v)
	}

	resources, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&approved.Resources)
	if err != nil {
		return nil, fmt.Errorf("spec.resources: %w", err)
	}

	restore, err := restoreValues(cc)
	if err != nil {
		return nil, err
	}
	networkPolicy, err := networkPolicyValues(cc)
	if err != nil {
		return nil, err
	}
	tls, err := tlsValues(cc)
	if err != nil {
		return nil, err
	}

	return map[string]any{
		"restore":             restore,
		"backupStore":         backupStoreValues(cc, restore),
		"name":                cc.Name,
		"namespace":           namespace,
		"engine":              string(ev.Engine),
		"version":             approved.Version,
		"image":               ImageOf(approved),
		"server":              ev.Server,
		"cli":                 ev.CLI,
		"appendDirName":       appendDirName(ev),
		"restartConfigHash":   RestartConfigHash(approved.Config),
		"replicas":            int64(approved.Replicas),
		"resources":           resources,
		"storage":             storage,
		"service":             map[string]any{"type": string(serviceType)},
		"config":              config,
		"auth":                auth,
		"probeTimeoutSeconds": int64(probeTimeout),
		"podDisruptionBudget": map[string]any{"enabled": true},
		"networkPolicy":       networkPolicy,
		"sharded":             shardedValues(cc, probeTimeout),
		"scheduling":          map[string]any{"spread": string(spreadOf(cc))},
		"tls":                 tls,
		"users":               usersValues(cc),
	}, nil
}

// engineVersionOf is the supported engine version a set of values runs,
// checked against its parameters.
func engineVersionOf(v cachev1alpha1.RolloutValues) (cachev1alpha1.EngineVersion, error) {
	ev, ok := cachev1alpha1.LookupEngineVersion(v.Engine, v.Version)
	if !ok {
		return ev, cachev1alpha1.UnsupportedEngineVersion(v.Engine, v.Version)
	}
	return ev, cachev1alpha1.CheckEngineConfig(ev, v.Config)
}

// appendDirName is the folder of the append-only files, for versions with
// multi-part AOF; empty (no appenddirname directive) for older ones.
func appendDirName(ev cachev1alpha1.EngineVersion) string {
	if ev.AppendDirName {
		return "appendonly"
	}
	return ""
}

// spreadOf is spec.scheduling.spread, preferred when unset.
func spreadOf(cc *cachev1alpha1.CacheCluster) cachev1alpha1.SpreadMode {
	if cc.Spec.Scheduling.Spread == "" {
		return cachev1alpha1.SpreadPreferred
	}
	return cc.Spec.Scheduling.Spread
}
