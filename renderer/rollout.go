package renderer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// restartOnly lists the Redis parameters CONFIG SET refuses (Redis marks
// them immutable) or that only take effect when the server starts. A change
// to one of them rolls the pods; every other parameter is applied live.
var restartOnly = map[string]bool{
	"always-show-logo": true, "appendfilename": true, "databases": true,
	"disable-thp": true, "enable-debug-command": true, "enable-module-command": true,
	"enable-protected-configs": true, "io-threads": true, "io-threads-do-reads": true,
	"loadmodule": true, "rdbchecksum": true, "set-proc-title": true,
	"syslog-enabled": true, "syslog-facility": true, "syslog-ident": true,
	"tcp-backlog": true, "cluster-port": true,
}

// SpecValues are the rollout values spec asks for.
func SpecValues(cc *cachev1alpha1.CacheCluster) cachev1alpha1.RolloutValues {
	v := cachev1alpha1.RolloutValues{
		Replicas: cc.DesiredReplicas(), Engine: cachev1alpha1.EngineOrDefault(cc.Spec.Engine), Version: cc.Spec.Version, Image: cc.Spec.Image,
		Resources: *cc.Spec.Resources.DeepCopy(),
	}
	if len(cc.Spec.Config) > 0 {
		v.Config = make(map[string]cachev1alpha1.ConfigValue, len(cc.Spec.Config))
		for k, x := range cc.Spec.Config {
			v.Config[k] = x
		}
	}
	return v
}

// Approved are the values the pods run: status.rollout once day-two has
// approved a spec, spec before that.
func Approved(cc *cachev1alpha1.CacheCluster) cachev1alpha1.RolloutValues {
	if r := cc.Status.Rollout; r != nil {
		return *r.RolloutValues.DeepCopy()
	}
	return SpecValues(cc)
}

// ImageOf is the image a set of rollout values runs: spec.image, or the
// engine's repository and the version (redis:7.0.15, valkey/valkey:8.0.1).
func ImageOf(v cachev1alpha1.RolloutValues) string {
	if v.Image != "" {
		return v.Image
	}
	repo := ImageRepository
	if ev, ok := cachev1alpha1.LookupEngineVersion(v.Engine, v.Version); ok {
		repo = ev.Repository
	}
	return repo + ":" + v.Version
}

// RestartConfigHash hashes the parameters that only take effect at a
// restart. It is a pod template annotation, so changing one of them makes
// a new StatefulSet revision, while a live parameter does not.
func RestartConfigHash(config map[string]cachev1alpha1.ConfigValue) string {
	keys := make([]string, 0, len(config))
	for k := range config {
		if restartOnly[k] {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k + "\x00" + string(config[k]) + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// TemplateKey identifies the pod template a set of values renders: two
// values with the same key run the same pods. Replicas and live parameters
// are not part of it.
func TemplateKey(v cachev1alpha1.RolloutValues) string {
	return TemplateKeyOf(ImageOf(v), string(cachev1alpha1.EngineOrDefault(v.Engine)), v.Version, RestartConfigHash(v.Config), v.Resources)
}

// TemplateKeyOf is TemplateKey from the parts a rendered pod template
// shows: the image, the engine, version and restart-config annotations,
// the resources.
func TemplateKeyOf(image, engine, version, restartHash string, res corev1.ResourceRequirements) string {
	b, _ := json.Marshal(res)
	h := sha256.New()
	h.Write([]byte(image + "\x00" + engine + "\x00" + version + "\x00" + restartHash + "\x00"))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ValuesKey identifies everything a set of values puts in the pods except
// their number: the template and every parameter. A refused change is
// recorded by it, so it is not tried again until spec changes.
func ValuesKey(v cachev1alpha1.RolloutValues) string {
	keys := make([]string, 0, len(v.Config))
	for k := range v.Config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	h.Write([]byte(TemplateKey(v) + "\x00"))
	for _, k := range keys {
		h.Write([]byte(k + "\x00" + string(v.Config[k]) + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ConfigChange compares the parameters of two values: live holds the
// parameters to CONFIG SET (added or changed, and live), restart is true
// when a change needs a restart: a restart-only parameter changed, or a
// live one was removed (only a restart returns it to its default).
func ConfigChange(from, to map[string]cachev1alpha1.ConfigValue) (live map[string]string, restart bool) {
	live = map[string]string{}
	for k, v := range to {
		if old, ok := from[k]; ok && old == v {
			continue
		}
		if restartOnly[k] {
			restart = true
			continue
		}
		live[k] = string(v)
	}
	for k := range from {
		if _, ok := to[k]; !ok {
			restart = true
		}
	}
	return live, restart
}

// SameParam compares two values of a Redis parameter as Redis does: words
// case-insensitively, memory sizes in bytes (Redis reports maxmemory 100mb
// back as 104857600).
func SameParam(a, b string) bool {
	if strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b)) {
		return true
	}
	x, xok := ParseMemory(a)
	y, yok := ParseMemory(b)
	return xok && yok && x == y
}

// ParseMemory reads a Redis memory value: 100, 1k, 1kb, 5m, 5mb, 1g, 1gb
// (k, m and g are powers of 1000, kb, mb and gb powers of 1024).
func ParseMemory(v string) (int64, bool) {
	v = strings.ToLower(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range []struct {
		s string
		m int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1000}, {"m", 1000 * 1000}, {"g", 1000 * 1000 * 1000}} {
		if strings.HasSuffix(v, u.s) {
			v, mult = strings.TrimSuffix(v, u.s), u.m
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n * mult, err == nil
}
