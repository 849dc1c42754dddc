package cluster

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// envResolver resolves a container's environment the way the kubelet does:
// literal values with $(VAR) expansion, Secrets, ConfigMaps and the downward
// API, including status.podIP, which virtual-kubelet's own resolver refuses.
type envResolver struct {
	secrets    corev1listers.SecretLister
	configMaps corev1listers.ConfigMapLister
}

// errConfig is a container whose configuration cannot be resolved yet
// (a missing Secret, say); the kubelet reports CreateContainerConfigError.
type errConfig struct{ msg string }

func (e errConfig) Error() string { return e.msg }

func (r *envResolver) resolve(pod *corev1.Pod, c *corev1.Container, podIP, hostIP string) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, from := range c.EnvFrom {
		switch {
		case from.SecretRef != nil:
			s, err := r.secrets.Secrets(pod.Namespace).Get(from.SecretRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && from.SecretRef.Optional != nil && *from.SecretRef.Optional {
					continue
				}
				return nil, errConfig{fmt.Sprintf("secret %q not found", from.SecretRef.Name)}
			}
			for k, v := range s.Data {
				set(from.Prefix+k, string(v))
			}
		case from.ConfigMapRef != nil:
			cm, err := r.configMaps.ConfigMaps(pod.Namespace).Get(from.ConfigMapRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
					continue
				}
				return nil, errConfig{fmt.Sprintf("configmap %q not found", from.ConfigMapRef.Name)}
			}
			for k, v := range cm.Data {
				set(from.Prefix+k, v)
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vars))
			continue
		}
		v, skip, err := r.valueFrom(pod, e.ValueFrom, podIP, hostIP)
		if err != nil {
			return nil, err
		}
		if !skip {
			set(e.Name, v)
		}
	}
	out := make([]string, 0, len(order)+1)
	if _, ok := vars["PATH"]; !ok {
		out = append(out, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	if _, ok := vars["HOSTNAME"]; !ok {
		out = append(out, "HOSTNAME="+pod.Name)
	}
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

func (r *envResolver) valueFrom(pod *corev1.Pod, src *corev1.EnvVarSource, podIP, hostIP string) (string, bool, error) {
	optional := func(p *bool) bool { return p != nil && *p }
	switch {
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := r.secrets.Secrets(pod.Namespace).Get(ref.Name)
		if err != nil {
			if optional(ref.Optional) {
				return "", true, nil
			}
			return "", false, errConfig{fmt.Sprintf("secret %q not found", ref.Name)}
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if optional(ref.Optional) {
				return "", true, nil
			}
			return "", false, errConfig{fmt.Sprintf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)}
		}
		return string(v), false, nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := r.configMaps.ConfigMaps(pod.Namespace).Get(ref.Name)
		if err != nil {
			if optional(ref.Optional) {
				return "", true, nil
			}
			return "", false, errConfig{fmt.Sprintf("configmap %q not found", ref.Name)}
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if optional(ref.Optional) {
				return "", true, nil
			}
			return "", false, errConfig{fmt.Sprintf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)}
		}
		return v, false, nil
	case src.FieldRef != nil:
		v, err := fieldValue(pod, src.FieldRef.FieldPath, podIP, hostIP)
		return v, false, err
	case src.ResourceFieldRef != nil:
		// Resource limits are not enforced on this node; report none.
		return "", true, nil
	}
	return "", true, nil
}

// fieldValue is the downward API.
func fieldValue(pod *corev1.Pod, path, podIP, hostIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return hostIP, nil
	case "metadata.labels", "metadata.annotations":
		m := pod.Labels
		if path == "metadata.annotations" {
			m = pod.Annotations
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%q\n", k, m[k])
		}
		return b.String(), nil
	}
	for _, prefix := range []string{"metadata.labels['", "metadata.annotations['"} {
		if strings.HasPrefix(path, prefix) && strings.HasSuffix(path, "']") {
			key := strings.TrimSuffix(strings.TrimPrefix(path, prefix), "']")
			if prefix == "metadata.labels['" {
				return pod.Labels[key], nil
			}
			return pod.Annotations[key], nil
		}
	}
	return "", errConfig{fmt.Sprintf("unsupported fieldPath %q", path)}
}

// expand replaces $(VAR) with earlier variables; $$(VAR) stays literal, as
// in the kubelet.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$(") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '$' && i+1 < len(s) {
			if s[i+1] == '$' {
				b.WriteByte('$')
				i++
				continue
			}
			if s[i+1] == '(' {
				if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
					name := s[i+2 : i+2+end]
					if v, ok := vars[name]; ok {
						b.WriteString(v)
					} else {
						b.WriteString(s[i : i+3+end])
					}
					i += 2 + end
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// expandArgs applies $(VAR) expansion to command and args, as the kubelet
// does with the container's environment.
func expandArgs(args []string, env []string) []string {
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = expand(a, vars)
	}
	return out
}
