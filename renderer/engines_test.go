package renderer

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// renderedPod renders a cluster and returns its redis.conf and the cache
// container.
func renderedPod(g Gomega, cc *cachev1alpha1.CacheCluster) (string, corev1.Container, map[string]string) {
	objs, err := Render(cc, DefaultCapabilities())
	g.Expect(err).NotTo(HaveOccurred())
	var conf string
	var c corev1.Container
	var annotations map[string]string
	for _, o := range objs {
		switch {
		case o.GetKind() == "ConfigMap" && o.GetName() == cc.Name+"-config":
			conf, _, _ = unstructured.NestedString(o.Object, "data", "redis.conf")
		case o.GetKind() == "StatefulSet" && o.GetName() == cc.Name:
			var sts appsv1.StatefulSet
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &sts)).To(Succeed())
			c, annotations = sts.Spec.Template.Spec.Containers[0], sts.Spec.Template.Annotations
		}
	}
	return conf, c, annotations
}

// The engine and version choose the image, the programs, the directives
// and the parameter names.
func TestEngineVersionsRender(t *testing.T) {
	tests := []struct {
		name       string
		engine     cachev1alpha1.Engine
		version    string
		image      string
		config     map[string]cachev1alpha1.ConfigValue
		wantImage  string
		wantServer string
		wantCLI    string
		wantConf   []string
		notConf    []string
	}{
		{name: "redis by default", version: "7.0.15", wantImage: "redis:7.0.15", wantServer: "redis-server", wantCLI: "redis-cli",
			config:   map[string]cachev1alpha1.ConfigValue{"busy-reply-threshold": "6000"},
			wantConf: []string{"appenddirname appendonly", "busy-reply-threshold 6000"}},
		{name: "valkey", engine: cachev1alpha1.EngineValkey, version: "8.0.1", wantImage: "valkey/valkey:8.0.1", wantServer: "valkey-server", wantCLI: "valkey-cli",
			wantConf: []string{"appenddirname appendonly"}},
		{name: "valkey with its own image", engine: cachev1alpha1.EngineValkey, version: "8.0.1", image: "registry.example.com/valkey:8.0.1-custom",
			wantImage: "registry.example.com/valkey:8.0.1-custom", wantServer: "valkey-server", wantCLI: "valkey-cli"},
		{name: "redis 6.2 has no appenddirname and knows the ziplist names", engine: cachev1alpha1.EngineRedis, version: "6.2.14",
			config:    map[string]cachev1alpha1.ConfigValue{"hash-max-listpack-entries": "256", "busy-reply-threshold": "6000"},
			wantImage: "redis:6.2.14", wantServer: "redis-server", wantCLI: "redis-cli",
			wantConf: []string{"hash-max-ziplist-entries 256", "lua-time-limit 6000"},
			notConf:  []string{"appenddirname", "listpack", "busy-reply-threshold"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cc := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
				Spec: cachev1alpha1.CacheClusterSpec{Engine: tt.engine, Version: tt.version, Image: tt.image, Config: tt.config}}
			conf, c, ann := renderedPod(g, cc)
			g.Expect(c.Image).To(Equal(tt.wantImage))
			g.Expect(c.Command).To(Equal([]string{tt.wantServer}))
			g.Expect(c.ReadinessProbe.Exec.Command[0]).To(Equal(tt.wantCLI))
			g.Expect(ann).To(HaveKeyWithValue(cachev1alpha1.AnnotationEngine, string(cachev1alpha1.EngineOrDefault(tt.engine))))
			g.Expect(ann).To(HaveKeyWithValue(cachev1alpha1.AnnotationVersion, tt.version))
			for _, line := range tt.wantConf {
				g.Expect(conf).To(ContainSubstring("\n" + line + "\n"))
			}
			for _, word := range tt.notConf {
				g.Expect(conf).NotTo(ContainSubstring(word))
			}
		})
	}
}

// An engine version outside the table, or a parameter the version does
// not know, renders nothing and says what is supported.
func TestUnsupportedEngineVersionsDoNotRender(t *testing.T) {
	tests := []struct {
		name    string
		spec    cachev1alpha1.CacheClusterSpec
		wantErr string
	}{
		{"a made-up redis version", cachev1alpha1.CacheClusterSpec{Version: "7.2.4"},
			"spec: engine redis version 7.2.4 is not supported; supported: redis 6.2.14, redis 7.0.15, valkey 8.0.1"},
		{"valkey under a redis version", cachev1alpha1.CacheClusterSpec{Engine: cachev1alpha1.EngineValkey, Version: "7.0.15"},
			"spec: engine valkey version 7.0.15 is not supported"},
		{"a parameter redis 6.2 does not have", cachev1alpha1.CacheClusterSpec{Version: "6.2.14", Config: map[string]cachev1alpha1.ConfigValue{"maxmemory-clients": "10%"}},
			"spec: redis 6.2.14 has no parameter maxmemory-clients"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Render(&cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: tt.spec}, DefaultCapabilities())
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}

// The redis.conf rendered for each version installed here starts that
// version's real server: it holds no directive the server does not know.
// make test installs both (hack/install-deps.sh).
func TestRenderedConfigStartsTheRealServer(t *testing.T) {
	for _, ev := range []struct {
		engine  cachev1alpha1.Engine
		version string
	}{{cachev1alpha1.EngineRedis, "7.0.15"}, {cachev1alpha1.EngineValkey, "8.0.1"}} {
		t.Run(string(ev.engine)+" "+ev.version, func(t *testing.T) {
			g := NewWithT(t)
			config := map[string]cachev1alpha1.ConfigValue{}
			// Every parameter a row renames or lacks, at a value every
			// version accepts.
			for _, row := range cachev1alpha1.EngineVersions {
				for k := range row.Renamed {
					config[k] = "128"
				}
			}
			config["busy-reply-threshold"] = "5000"
			config["list-max-listpack-size"] = "-2"
			for _, k := range []string{"aof-timestamp-enabled", "latency-tracking"} {
				config[k] = "no"
			}
			config["maxmemory-clients"], config["repl-diskless-sync-max-replicas"] = "0", "0"
			cc := &cachev1alpha1.CacheCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"},
				Spec: cachev1alpha1.CacheClusterSpec{Engine: ev.engine, Version: ev.version, Config: config}}
			conf, c, _ := renderedPod(g, cc)
			runServer(t, g, c.Command[0], conf)
		})
	}
}

// runServer starts server with conf in a temporary folder (no TCP port)
// and waits until it says it is ready; a refused directive ends it first.
func runServer(t *testing.T, g Gomega, server, conf string) {
	bin, err := exec.LookPath(server)
	g.Expect(err).NotTo(HaveOccurred(), "%s is needed (hack/install-deps.sh installs it)", server)
	dir := t.TempDir()
	path := filepath.Join(dir, "redis.conf")
	// The rendered file names the pod's volume, /data. A server checks its
	// dir while it reads the file, before --dir on the command line takes
	// effect, so the file itself points at the temporary folder; a machine
	// without /data would otherwise refuse every rendering.
	lines := strings.Split(conf, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "dir ") {
			lines[i] = "dir " + dir
		}
	}
	conf = strings.Join(lines, "\n")
	g.Expect(os.WriteFile(path, []byte(conf), 0o600)).To(Succeed())
	cmd := exec.Command(bin, path, "--port", "0", "--dir", dir, "--unixsocket", filepath.Join(dir, "s.sock"))
	out, err := cmd.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	cmd.Stderr = cmd.Stdout
	g.Expect(cmd.Start()).To(Succeed())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var log strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(strings.ToLower(sc.Text()), "ready to accept connections") {
			return
		}
	}
	t.Fatalf("%s did not start with the rendered redis.conf:\n%s\n--- redis.conf\n%s", server, log.String(), conf)
}
