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

// recommend writes the recommendation into a real git checkout: comments
// kept, only the value changed, a new branch, the evidence in the commit.
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
	cc.Status.Recommendations = []cachev1alpha1.Recommendation{{
		Field: "spec.config.maxmemory", Current: "100mb", Recommended: "152mb",
		Reason: "used_memory on the master (shop-0) stayed above 80% of maxmemory for 5m0s",
	}}
	live, err := yaml.Marshal(cc)
	g.Expect(err).NotTo(HaveOccurred())
	from := writeFile(t, t.TempDir(), "live.yaml", string(live))

	var out bytes.Buffer
	g.Expect(run([]string{"recommend", "shop", "--repo", repo, "--path", "clusters/shop.yaml", "--from", from, "--branch", "cacheops/shop-memory"}, nil, &out)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("on branch cacheops/shop-memory"))

	g.Expect(gitIn("rev-parse", "--abbrev-ref", "HEAD")).To(Equal("cacheops/shop-memory"))
	msg := gitIn("log", "-1", "--format=%B")
	g.Expect(msg).To(HavePrefix("cacheops: prod/shop: config.maxmemory 100mb→152mb"))
	g.Expect(msg).To(ContainSubstring("Evidence: used_memory on the master (shop-0) stayed above 80% of maxmemory for 5m0s"))
	g.Expect(gitIn("diff", "--stat", "main", "HEAD")).To(ContainSubstring("1 file changed, 1 insertion(+), 1 deletion(-)"))

	edited, err := os.ReadFile(filepath.Join(repo, "clusters", "shop.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(edited)).To(ContainSubstring("maxmemory: 152mb # raised from 100mb by kubectl cache recommend"))
	for _, kept := range []string{"# The shop's cache. Owned by team-shop.", `version: "7.0.15" # pinned until the 7.2 rollout`, "# evict the least recently used keys when full", "maxmemory-policy: allkeys-lru", "  maxmemory: 100mb\n"} {
		g.Expect(string(edited)).To(ContainSubstring(kept), "kept: %s", kept)
	}

	// A recommendation made for another value than the manifest holds is
	// stale: refused.
	stale := cc.DeepCopy()
	stale.Status.Recommendations[0].Current, stale.Status.Recommendations[0].Recommended = "64mb", "96mb"
	staleYAML, err := yaml.Marshal(stale)
	g.Expect(err).NotTo(HaveOccurred())
	staleFile := writeFile(t, t.TempDir(), "stale.yaml", string(staleYAML))
	err = run([]string{"recommend", "shop", "--repo", repo, "--path", "clusters/shop.yaml", "--from", staleFile, "--branch", "stale"}, nil, &out)
	g.Expect(err).To(MatchError(ContainSubstring("the recommendation was made for \"64mb\": it is stale")))

	// Nothing left to change: refused, no empty commit.
	err = run([]string{"recommend", "shop", "--repo", repo, "--path", "clusters/shop.yaml", "--from", from, "--branch", "again"}, nil, &out)
	g.Expect(err).To(MatchError(ContainSubstring("already holds every recommended value")))
}
