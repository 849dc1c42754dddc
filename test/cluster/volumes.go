package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// volumeSet materialises a pod's volumes as folders; containers see them at
// their mount paths through bind mounts in a private mount namespace.
type volumeSet struct {
	dirs map[string]string // volume name → folder
}

func (p *provider) prepareVolumes(ctx context.Context, pod *corev1.Pod, podDir string) (*volumeSet, error) {
	vs := &volumeSet{dirs: map[string]string{}}
	var fsGroup *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		fsGroup = sc.FSGroup
	}
	for _, v := range pod.Spec.Volumes {
		dir := filepath.Join(podDir, "volumes", v.Name)
		switch {
		case v.EmptyDir != nil:
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return nil, err
			}
			if err := ownForGroup(dir, fsGroup); err != nil {
				return nil, err
			}
		case v.ConfigMap != nil:
			cm, err := p.configMaps.ConfigMaps(pod.Namespace).Get(v.ConfigMap.Name)
			if err != nil {
				if v.ConfigMap.Optional != nil && *v.ConfigMap.Optional {
					cm = &corev1.ConfigMap{}
				} else {
					return nil, errConfig{fmt.Sprintf("configmap %q not found", v.ConfigMap.Name)}
				}
			}
			files := map[string][]byte{}
			for k, val := range cm.Data {
				files[k] = []byte(val)
			}
			for k, val := range cm.BinaryData {
				files[k] = val
			}
			if err := writeFiles(dir, files, v.ConfigMap.Items, v.ConfigMap.DefaultMode, fsGroup); err != nil {
				return nil, err
			}
		case v.Secret != nil:
			s, err := p.secrets.Secrets(pod.Namespace).Get(v.Secret.SecretName)
			if err != nil {
				if v.Secret.Optional != nil && *v.Secret.Optional {
					s = &corev1.Secret{}
				} else {
					return nil, errConfig{fmt.Sprintf("secret %q not found", v.Secret.SecretName)}
				}
			}
			if err := writeFiles(dir, s.Data, v.Secret.Items, v.Secret.DefaultMode, fsGroup); err != nil {
				return nil, err
			}
		case v.Projected != nil:
			if err := p.writeProjected(pod, dir, v.Projected, fsGroup); err != nil {
				return nil, err
			}
		case v.DownwardAPI != nil:
			files := map[string][]byte{}
			for _, item := range v.DownwardAPI.Items {
				if item.FieldRef != nil {
					val, err := fieldValue(pod, item.FieldRef.FieldPath, "", "")
					if err != nil {
						return nil, err
					}
					files[item.Path] = []byte(val)
				}
			}
			if err := writeFiles(dir, files, nil, v.DownwardAPI.DefaultMode, fsGroup); err != nil {
				return nil, err
			}
		case v.PersistentVolumeClaim != nil:
			pvDir, err := pvcDir(ctx, p.client, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
			if err != nil {
				return nil, err
			}
			if err := ownForGroup(pvDir, fsGroup); err != nil {
				return nil, err
			}
			dir = pvDir
		case v.HostPath != nil:
			dir = v.HostPath.Path
		default:
			return nil, errConfig{fmt.Sprintf("volume %q: this process-backed node supports emptyDir, configMap, secret, projected, downwardAPI, persistentVolumeClaim and hostPath", v.Name)}
		}
		vs.dirs[v.Name] = dir
	}
	return vs, nil
}

func (p *provider) writeProjected(pod *corev1.Pod, dir string, proj *corev1.ProjectedVolumeSource, fsGroup *int64) error {
	files := map[string][]byte{}
	for _, src := range proj.Sources {
		switch {
		case src.ConfigMap != nil:
			cm, err := p.configMaps.ConfigMaps(pod.Namespace).Get(src.ConfigMap.Name)
			if err != nil {
				if src.ConfigMap.Optional != nil && *src.ConfigMap.Optional {
					continue
				}
				return errConfig{fmt.Sprintf("configmap %q not found", src.ConfigMap.Name)}
			}
			for k, val := range selectItems(stringMap(cm.Data), src.ConfigMap.Items) {
				files[k] = val
			}
		case src.Secret != nil:
			s, err := p.secrets.Secrets(pod.Namespace).Get(src.Secret.Name)
			if err != nil {
				if src.Secret.Optional != nil && *src.Secret.Optional {
					continue
				}
				return errConfig{fmt.Sprintf("secret %q not found", src.Secret.Name)}
			}
			for k, val := range selectItems(s.Data, src.Secret.Items) {
				files[k] = val
			}
		case src.DownwardAPI != nil:
			for _, item := range src.DownwardAPI.Items {
				if item.FieldRef != nil {
					val, err := fieldValue(pod, item.FieldRef.FieldPath, "", "")
					if err != nil {
						return err
					}
					files[item.Path] = []byte(val)
				}
			}
		}
		// Service account tokens are not issued: pods here talk to no API.
	}
	return writeFiles(dir, files, nil, proj.DefaultMode, fsGroup)
}

func stringMap(m map[string]string) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}

func selectItems(data map[string][]byte, items []corev1.KeyToPath) map[string][]byte {
	if len(items) == 0 {
		return data
	}
	out := map[string][]byte{}
	for _, it := range items {
		if v, ok := data[it.Key]; ok {
			out[it.Path] = v
		}
	}
	return out
}

func writeFiles(dir string, data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32, fsGroup *int64) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if defaultMode != nil {
		mode = os.FileMode(*defaultMode)
	}
	for name, content := range selectItems(data, items) {
		path := filepath.Join(dir, filepath.Clean("/"+name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, content, mode); err != nil {
			return err
		}
		if err := os.Chmod(path, mode); err != nil {
			return err
		}
		if fsGroup != nil {
			if err := os.Chown(path, -1, int(*fsGroup)); err != nil {
				return err
			}
		}
	}
	return nil
}

// ownForGroup gives a folder to the pod's fsGroup with the setgid bit, as
// the kubelet does, so a non-root container can write its data.
func ownForGroup(dir string, fsGroup *int64) error {
	if fsGroup == nil {
		return nil
	}
	if err := os.Chown(dir, -1, int(*fsGroup)); err != nil {
		return err
	}
	return os.Chmod(dir, 0o2775)
}

// pvcDir is the folder behind a bound claim.
func pvcDir(ctx context.Context, c kubernetes.Interface, ns, claim string) (string, error) {
	pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", errConfig{fmt.Sprintf("persistentvolumeclaim %q: %v", claim, err)}
	}
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return "", errConfig{fmt.Sprintf("persistentvolumeclaim %q is not bound yet", claim)}
	}
	pv, err := c.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", errConfig{fmt.Sprintf("persistentvolume %q: %v", pvc.Spec.VolumeName, err)}
	}
	switch {
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path, nil
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path, nil
	}
	return "", errConfig{fmt.Sprintf("persistentvolume %q is neither hostPath nor local", pv.Name)}
}
