package renderer

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// PrecheckName names the pre-check pod and its ConfigMap.
func PrecheckName(cc *cachev1alpha1.CacheCluster) string { return cc.Name + "-precheck" }

// precheckGracePeriod is short: the pre-check pod holds no data anyone
// needs.
const precheckGracePeriod int64 = 5

// RenderPrecheck renders the pod of an upgrade pre-check and its ConfigMap:
// the StatefulSet's pod template and redis.conf rendered with status.rollout
// set to target, run once (RestartPolicy Never) on empty folders instead of
// the claims, reading its own copy of the ConfigMap. The pod carries the
// target's template key (AnnotationTemplateKey) and only the managed-by and
// precheck labels: no Service selects it, so it gets no client traffic, and
// without LabelCluster neither the StatefulSet nor day-one's prune counts
// the two objects as its own.
//
// seedFrom, when set, is the address (ip:port) of the cluster pod whose
// data the pre-check loads: an init container (the operator's image,
// `manager precheck-seed`) takes a dump of it by the backup stream into the
// empty data folder before the server starts, and reports what the dump
// held in its termination message (SeedMessagePath). With it the pre-check
// tests the real configuration on a copy of the real data, not only that
// the template starts.
//
// Like Render, it returns objects ready for server-side apply, without an
// owner reference; the caller sets it.
func RenderPrecheck(cc *cachev1alpha1.CacheCluster, target cachev1alpha1.RolloutValues, seedFrom string) (pod, cm *unstructured.Unstructured, err error) {
	// The values the pods will run once day-two approves target.
	draft := cc.DeepCopy()
	draft.Status.Rollout = &cachev1alpha1.RolloutStatus{RolloutValues: *target.DeepCopy()}
	objs, err := Render(draft, DefaultCapabilities())
	if err != nil {
		return nil, nil, fmt.Errorf("rendering the new template: %w", err)
	}
	var sts *appsv1.StatefulSet
	var conf *corev1.ConfigMap
	for _, o := range objs {
		switch {
		// The cache pods', not the backup store's.
		case o.GetKind() == "StatefulSet" && o.GetName() == cc.Name:
			sts = &appsv1.StatefulSet{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, sts)
		// redis.conf, not another ConfigMap of the cluster (the restore
		// state).
		case o.GetKind() == "ConfigMap" && o.GetName() == cc.Name+"-config":
			conf = &corev1.ConfigMap{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, conf)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("decoding the rendered %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	if sts == nil || conf == nil {
		return nil, nil, fmt.Errorf("the chart rendered no StatefulSet %s or no ConfigMap %s-config", cc.Name, cc.Name)
	}

	name := PrecheckName(cc)
	labels := map[string]string{cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue, cachev1alpha1.LabelPrecheck: cc.Name}
	pcm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: sts.Namespace, Name: name, Labels: labels},
		Data:       conf.Data,
	}
	spec := sts.Spec.Template.Spec.DeepCopy()
	spec.RestartPolicy = corev1.RestartPolicyNever
	// It runs beside the cluster's pods for a moment: the spread that
	// keeps them apart would keep it off every node they use.
	spec.Affinity, spec.TopologySpreadConstraints = nil, nil
	grace := precheckGracePeriod
	spec.TerminationGracePeriodSeconds = &grace
	for i, v := range spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == conf.Name {
			spec.Volumes[i].ConfigMap.Name = name
		}
	}
	for _, t := range sts.Spec.VolumeClaimTemplates {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	// A server that refuses its configuration or its data says why in its
	// log: the kubelet puts the log's end into the termination message,
	// which the pre-check's verdict quotes.
	for i := range spec.Containers {
		if spec.Containers[i].Name == "redis" {
			spec.Containers[i].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		}
	}
	if seedFrom != "" {
		// The seed replaces a restore init container: the pre-check
		// starts on the seed's copy.
		spec.InitContainers = nil
		if err := addSeed(cc, spec, seedFrom); err != nil {
			return nil, nil, err
		}
	}
	ppod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: sts.Namespace, Name: name, Labels: labels,
			Annotations: map[string]string{cachev1alpha1.AnnotationTemplateKey: TemplateKey(target)},
		},
		Spec: *spec,
	}
	if pod, err = toApply(ppod); err != nil {
		return nil, nil, err
	}
	if cm, err = toApply(pcm); err != nil {
		return nil, nil, err
	}
	return pod, cm, nil
}

// SeedContainerName is the pre-check pod's init container that copies a
// cluster pod's data; SeedMessagePath is its termination message, the
// line backup.SeedReport.Format writes.
const (
	SeedContainerName = "seed"
	SeedMessagePath   = "/var/run/cacheops-seed/report"
	seedReportVolume  = "seed-report"
)

// The seed's environment for a cluster with spec.tls: the CA bundle it
// checks the source's certificate against, and the name it checks in it
// (dayTwo/access.FromEnv reads them).
const (
	SeedTLSCAFileEnv     = "REDIS_TLS_CA_FILE"
	SeedTLSServerNameEnv = "REDIS_TLS_SERVER_NAME"
	// SeedUsernameEnv names the user the seed authenticates as in a
	// cluster with spec.users (the operator's).
	SeedUsernameEnv = "REDIS_USERNAME"
)

// addSeed adds the seed init container to the pre-check pod: it runs as the
// server does (the same user, the data volume, the password from the same
// Secret, the TLS files when the cluster has TLS) with the operator's
// image, whose manager has the subcommand.
func addSeed(cc *cachev1alpha1.CacheCluster, spec *corev1.PodSpec, seedFrom string) error {
	server := find(spec.Containers, func(c corev1.Container) bool { return c.Name == "redis" })
	if server == nil {
		return fmt.Errorf("the pod template has no redis container")
	}
	password := find(server.Env, func(e corev1.EnvVar) bool { return e.Name == "REDIS_PASSWORD" })
	if password == nil {
		return fmt.Errorf("the redis container has no REDIS_PASSWORD")
	}
	data := find(server.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/data" })
	if data == nil {
		return fmt.Errorf("the redis container mounts no /data")
	}
	env := []corev1.EnvVar{*password.DeepCopy()}
	if UsersEnabled(cc) {
		env = append(env, corev1.EnvVar{Name: SeedUsernameEnv, Value: cachev1alpha1.OperatorUser})
	}
	mounts := []corev1.VolumeMount{
		{Name: data.Name, MountPath: "/data"},
		{Name: seedReportVolume, MountPath: "/var/run/cacheops-seed"},
	}
	if TLSEnabled(cc) {
		tls := find(server.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == TLSMountPath })
		if tls == nil {
			return fmt.Errorf("the redis container mounts no %s", TLSMountPath)
		}
		mounts = append(mounts, corev1.VolumeMount{Name: tls.Name, MountPath: TLSMountPath, ReadOnly: true})
		env = append(env,
			corev1.EnvVar{Name: SeedTLSCAFileEnv, Value: TLSMountPath + "/ca.crt"},
			corev1.EnvVar{Name: SeedTLSServerNameEnv, Value: TLSServerName(cc)})
	}
	no, yes := false, true
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: seedReportVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	spec.InitContainers = append(spec.InitContainers, corev1.Container{
		Name:                     SeedContainerName,
		Image:                    RestoreImage,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Command:                  []string{"/manager", "precheck-seed"},
		Args:                     []string{"--from=" + seedFrom, "--data-dir=/data", "--report=" + SeedMessagePath},
		Env:                      env,
		VolumeMounts:             mounts,
		TerminationMessagePath:   SeedMessagePath,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, RunAsNonRoot: &yes,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	})
	return nil
}

// toApply turns a typed object into the unstructured form server-side
// apply takes, without the fields a typed object always carries but no one
// sets here (a null creationTimestamp, an empty status): applied, they
// would only claim fields for the field manager.
func toApply(obj runtime.Object) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: content}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}

// find is the first item that matches, in place, or nil.
func find[T any](items []T, match func(T) bool) *T {
	if i := slices.IndexFunc(items, match); i >= 0 {
		return &items[i]
	}
	return nil
}
