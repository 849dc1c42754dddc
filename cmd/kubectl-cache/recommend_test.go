package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

const manifest = `# The shop's cache. Owned by team-shop.
apiVersion: cache.cacheops.io/v1alpha1
kind: CacheCluster
metadata:
  name: shop
  namespace: prod
spec:
  version: "7.0.15" # pinned until the 7.2 rollout
  replicas: 3
  config:
    # evict the least recently used keys when full
    maxmemory-policy: allkeys-lru
    maxmemory: 100mb
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: unrelated
data:
  maxmemory: 100mb
`

// recommend reads the cluster from --from and commits on the branch of
// --branch (the edit and the commit are tested in package recommend).
func TestRecommendCommitsOnANewBranch(t *testing.T) {
	g := NewWithT(t)
	repo := t.TempDir()
	gitIn := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		return strings.TrimSpace(string(out))
	}
	gitIn("init", "-q", "-b", "main")
	g.Expect(os.MkdirAll(filepath.Join(repo, "clusters"), 0o755)).To(Succeed())
	writeFile(t, filepath.Join(repo, "clusters"), "shop.yaml", manifest)
	gitIn("add", ".")
	gitIn("commit", "-qm", "shop")

	// The CacheCluster as `kubectl get cc shop -o yaml` shows it.
	cc := &cachev1alpha1.CacheCluster{}
	g.Expect(yaml.Unmarshal([]byte(strings.Split(manifest, "---")[0]), cc)).To(Succeed())
	none, err := yaml.Marshal(cc)
	g.Expect(err).NotTo(HaveOccurred())
	cc.Status.Recommendations = []cachev1alpha1.Recommendation{{
		Field: "spec.config.maxmemory", Current: "100mb", Recommended: "152mb",
		Reason: "used_memory on the master (shop-0) stayed above 80% of maxmemory for 5m0s",
	}}
	live, err := yaml.Marshal(cc)
	g.Expect(err).NotTo(HaveOccurred())
	from := writeFile(t, t.TempDir(), "live.yaml", string(live))

	var out bytes.Buffer
	g.Expect(run([]string{"recommend", "shop", "--repo", repo, "--path", "clusters/shop.yaml", "--from", writeFile(t, t.TempDir(), "none.yaml", string(none))}, nil, &out)).To(Succeed())
	g.Expect(out.String()).To(Equal("CacheCluster prod/shop has no recommendation; nothing to do\n"))

	out.Reset()
	g.Expect(run([]string{"recommend", "shop", "--repo", repo, "--path", "clusters/shop.yaml", "--from", from, "--branch", "cacheops/shop-memory"}, nil, &out)).To(Succeed())
	sha := gitIn("rev-parse", "HEAD")
	g.Expect(out.String()).To(Equal("committed " + sha[:12] + " on branch cacheops/shop-memory in " + repo + "; push it and open a pull request:\n  git -C " + repo + " push -u origin cacheops/shop-memory\n"))
	g.Expect(gitIn("rev-parse", "--abbrev-ref", "HEAD")).To(Equal("cacheops/shop-memory"))

	err = run([]string{"recommend", "shop", "--repo", repo, "--from", from}, nil, &out)
	g.Expect(err).To(MatchError("recommend needs --repo DIR and --path FILE"))
}
