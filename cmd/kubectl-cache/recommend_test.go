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

// recommend reads the cluster from --from, commits on the branch of
// --branch and pushes it to the remote, a bare repository (the edit and
// the commit are tested in package recommend); --no-push only commits.
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
	// The remote: a bare repository, as a git server holds it.
	origin := filepath.Join(t.TempDir(), "origin.git")
	init, err := exec.Command("git", "init", "-q", "--bare", "-b", "main", origin).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(init))
	gitIn("remote", "add", "origin", origin)
	gitIn("push", "-q", "origin", "main")
	inOrigin := func(args ...string) (string, error) {
		out, err := exec.Command("git", append([]string{"-C", origin}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}

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

	// --no-push: only the local commit.
	out.Reset()
	g.Expect(run([]string{"recommend", "shop", "--repo", repo, "--path", "clusters/shop.yaml", "--from", from, "--branch", "cacheops/shop-memory", "--no-push"}, nil, &out)).To(Succeed())
	sha := gitIn("rev-parse", "HEAD")
	g.Expect(out.String()).To(Equal("committed " + sha[:12] + " on branch cacheops/shop-memory in " + repo + "; push it and open a pull request:\n  git -C " + repo + " push -u origin cacheops/shop-memory\n"))
	g.Expect(gitIn("rev-parse", "--abbrev-ref", "HEAD")).To(Equal("cacheops/shop-memory"))
	_, err = inOrigin("rev-parse", "--verify", "refs/heads/cacheops/shop-memory")
	g.Expect(err).To(HaveOccurred(), "--no-push pushed the branch")

	// By default the branch goes to the remote, with the commit.
	gitIn("checkout", "-q", "main")
	out.Reset()
	g.Expect(run([]string{"recommend", "shop", "--repo", repo, "--path", "clusters/shop.yaml", "--from", from, "--branch", "cacheops/shop-memory-2"}, nil, &out)).To(Succeed())
	sha = gitIn("rev-parse", "HEAD")
	g.Expect(out.String()).To(Equal("committed " + sha[:12] + " on branch cacheops/shop-memory-2 in " + repo + " and pushed it to origin; open a pull request from cacheops/shop-memory-2\n"))
	pushed, err := inOrigin("rev-parse", "refs/heads/cacheops/shop-memory-2")
	g.Expect(err).NotTo(HaveOccurred(), pushed)
	g.Expect(pushed).To(Equal(sha))
	g.Expect(gitIn("rev-parse", "--abbrev-ref", "cacheops/shop-memory-2@{upstream}")).To(Equal("origin/cacheops/shop-memory-2"))

	// A remote that refuses: the error says the commit is there locally.
	gitIn("checkout", "-q", "main")
	err = run([]string{"recommend", "shop", "--repo", repo, "--path", "clusters/shop.yaml", "--from", from, "--branch", "cacheops/shop-memory-3", "--remote", "nowhere"}, nil, &out)
	g.Expect(err).To(MatchError(ContainSubstring("on branch cacheops/shop-memory-3 in " + repo + ", but pushing it failed")))

	err = run([]string{"recommend", "shop", "--repo", repo, "--from", from}, nil, &out)
	g.Expect(err).To(MatchError("recommend needs --repo DIR and --path FILE"))
}
