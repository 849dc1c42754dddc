package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// volumeSet materialises a pod's volumes as folders; containers see them at
// their mount paths through bind mounts in a private mount namespace.
type volumeSet struct {
	dirs map[string]string // volume name → folder
	// sums are the digests of the content written into the configMap,
	// secret, projected and downwardAPI volumes, by name.
	sums map[string]string
}

func (p *provider) prepareVolumes(ctx context.Context, pod *corev1.Pod, podDir string) (*volumeSet, error) {
	vs := &volumeSet{dirs: map[string]string{}, sums: map[string]string{}}
	fsGroup := podFSGroup(pod)
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
		case v.ConfigMap != nil, v.Secret != nil, v.Projected != nil, v.DownwardAPI != nil:
			files, mode, err := p.volumeContent(pod, v)
			if err != nil {
				return nil, err
			}
			sum, err := writeAtomic(dir, files, mode, fsGroup, "")
			if err != nil {
				return nil, err
			}
			vs.sums[v.Name] = sum
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

func podFSGroup(pod *corev1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}

// volumeContent is what a configMap, secret, projected or downwardAPI
// volume holds now: its files by path, and their mode.
func (p *provider) volumeContent(pod *corev1.Pod, v corev1.Volume) (map[string][]byte, os.FileMode, error) {
	modeOf := func(m *int32) os.FileMode {
		if m != nil {
			return os.FileMode(*m)
		}
		return 0o644
	}
	switch {
	case v.ConfigMap != nil:
		cm, err := p.configMaps.ConfigMaps(pod.Namespace).Get(v.ConfigMap.Name)
		if err != nil {
			if v.ConfigMap.Optional != nil && *v.ConfigMap.Optional {
				cm = &corev1.ConfigMap{}
			} else {
				return nil, 0, errConfig{fmt.Sprintf("configmap %q not found", v.ConfigMap.Name)}
			}
		}
		files := map[string][]byte{}
		for k, val := range cm.Data {
			files[k] = []byte(val)
		}
		for k, val := range cm.BinaryData {
			files[k] = val
		}
		return selectItems(files, v.ConfigMap.Items), modeOf(v.ConfigMap.DefaultMode), nil
	case v.Secret != nil:
		s, err := p.secrets.Secrets(pod.Namespace).Get(v.Secret.SecretName)
		if err != nil {
			if v.Secret.Optional != nil && *v.Secret.Optional {
				s = &corev1.Secret{}
			} else {
				return nil, 0, errConfig{fmt.Sprintf("secret %q not found", v.Secret.SecretName)}
			}
		}
		return selectItems(s.Data, v.Secret.Items), modeOf(v.Secret.DefaultMode), nil
	case v.Projected != nil:
		files, err := p.projectedContent(pod, v.Projected)
		return files, modeOf(v.Projected.DefaultMode), err
	case v.DownwardAPI != nil:
		files := map[string][]byte{}
		for _, item := range v.DownwardAPI.Items {
			if item.FieldRef != nil {
				val, err := fieldValue(pod, item.FieldRef.FieldPath, "", "")
				if err != nil {
					return nil, 0, err
				}
				files[item.Path] = []byte(val)
			}
		}
		return files, modeOf(v.DownwardAPI.DefaultMode), nil
	}
	return nil, 0, fmt.Errorf("volume %q has no content of its own", v.Name)
}

func (p *provider) projectedContent(pod *corev1.Pod, proj *corev1.ProjectedVolumeSource) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, src := range proj.Sources {
		switch {
		case src.ConfigMap != nil:
			cm, err := p.configMaps.ConfigMaps(pod.Namespace).Get(src.ConfigMap.Name)
			if err != nil {
				if src.ConfigMap.Optional != nil && *src.ConfigMap.Optional {
					continue
				}
				return nil, errConfig{fmt.Sprintf("configmap %q not found", src.ConfigMap.Name)}
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
				return nil, errConfig{fmt.Sprintf("secret %q not found", src.Secret.Name)}
			}
			for k, val := range selectItems(s.Data, src.Secret.Items) {
				files[k] = val
			}
		case src.DownwardAPI != nil:
			for _, item := range src.DownwardAPI.Items {
				if item.FieldRef != nil {
					val, err := fieldValue(pod, item.FieldRef.FieldPath, "", "")
					if err != nil {
						return nil, err
					}
					files[item.Path] = []byte(val)
				}
			}
		}
		// Service account tokens are not issued: pods here talk to no API.
	}
	return files, nil
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

// dataLink is the kubelet's name for the link to a volume's current
// content; each file of the volume is a link through it.
const dataLink = "..data"

// writeAtomic puts files into dir the way the kubelet's atomic writer
// does: the content goes into a new hidden folder, ..data is switched to
// it with one rename (a reader sees the old files or the new ones, never
// a mix), and each top-level name links through ..data. The volume folder
// itself stays, so a bind mount of it sees every update. It does nothing
// when the content's digest equals prev, and returns the digest.
func writeAtomic(dir string, files map[string][]byte, mode os.FileMode, fsGroup *int64, prev string) (string, error) {
	sum := contentDigest(files, mode)
	if sum == prev {
		return sum, nil
	}
	if prev == "" {
		// A pod's first write: whatever an earlier pod of the name left
		// goes.
		if err := os.RemoveAll(dir); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tsDir, err := os.MkdirTemp(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05."))
	if err != nil {
		return "", err
	}
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return "", err
	}
	top := map[string]bool{}
	for name, content := range files {
		rel := filepath.Clean("/" + name)[1:]
		top[strings.SplitN(rel, "/", 2)[0]] = true
		path := filepath.Join(tsDir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, content, mode); err != nil {
			return "", err
		}
		if err := os.Chmod(path, mode); err != nil {
			return "", err
		}
		if fsGroup != nil {
			if err := os.Chown(path, -1, int(*fsGroup)); err != nil {
				return "", err
			}
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, dataLink))
	tmpLink := filepath.Join(dir, dataLink+"_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		return "", err
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataLink)); err != nil {
		return "", err
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if target, err := os.Readlink(link); err == nil && target == filepath.Join(dataLink, name) {
			continue
		}
		if err := os.Symlink(filepath.Join(dataLink, name), link); err != nil {
			return "", err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") && !top[e.Name()] {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	if old != "" && old != filepath.Base(tsDir) {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return sum, nil
}

// contentDigest identifies a volume's content.
func contentDigest(files map[string][]byte, mode os.FileMode) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	fmt.Fprintf(h, "%o\n", mode)
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(files[n]))
		h.Write(files[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// refreshVolumes updates, every period, the configMap, secret, projected
// and downwardAPI volumes of the running pods whose source changed, as
// the kubelet does on its sync loop (the kubelet takes up to about a
// minute; the period here is Options.VolumeRefreshPeriod). A source that
// cannot be read keeps the files as they are.
func (p *provider) refreshVolumes(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		pods := make([]*podRuntime, 0, len(p.pods))
		for _, r := range p.pods {
			if r.vols != nil && !r.deleting {
				pods = append(pods, r)
			}
		}
		p.mu.Unlock()
		for _, r := range pods {
			for _, v := range r.pod.Spec.Volumes {
				if v.ConfigMap == nil && v.Secret == nil && v.Projected == nil && v.DownwardAPI == nil {
					continue
				}
				p.mu.Lock()
				dir, prev := r.vols.dirs[v.Name], r.vols.sums[v.Name]
				p.mu.Unlock()
				files, mode, err := p.volumeContent(r.pod, v)
				if err != nil || dir == "" {
					continue
				}
				sum, err := writeAtomic(dir, files, mode, podFSGroup(r.pod), prev)
				if err != nil {
					log.L.Warnf("updating volume %s of pod %s/%s: %v", v.Name, r.pod.Namespace, r.pod.Name, err)
					continue
				}
				if sum != prev {
					log.L.Infof("updated volume %s of pod %s/%s", v.Name, r.pod.Namespace, r.pod.Name)
				}
				p.mu.Lock()
				r.vols.sums[v.Name] = sum
				p.mu.Unlock()
			}
		}
	}
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
