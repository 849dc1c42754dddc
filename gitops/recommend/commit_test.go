package recommend

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

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

// Commit writes the recommendation into a real git checkout: comments
// kept, only the value changed, a new branch, the evidence in the commit.
func TestCommitOnANewBranch(t *testing.T) {
	g := NewWithT(t)
	repo := t.TempDir()
	gitIn := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		return strings.TrimSpace(string(out))
	}
	gitIn("init", "-q", "-b", "main")
	g.Expect(os.MkdirAll(filepath.Join(repo, "clusters"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(repo, "clusters", "shop.yaml"), []byte(manifest), 0o644)).To(Succeed())
	gitIn("add", ".")
	gitIn("commit", "-qm", "shop")

	recs := []cachev1alpha1.Recommendation{{
		Field: "spec.config.maxmemory", Current: "100mb", Recommended: "152mb",
		Reason: "used_memory on the master (shop-0) stayed above 80% of maxmemory for 5m0s",
	}}
	sha, err := Commit(repo, "clusters/shop.yaml", "prod", "shop", recs, "cacheops/shop-memory")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sha).To(Equal(gitIn("rev-parse", "HEAD")))

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
	stale := []cachev1alpha1.Recommendation{recs[0]}
	stale[0].Current, stale[0].Recommended = "64mb", "96mb"
	_, err = Commit(repo, "clusters/shop.yaml", "prod", "shop", stale, "stale")
	g.Expect(err).To(MatchError(ContainSubstring("the recommendation was made for \"64mb\": it is stale")))

	// Nothing left to change: refused, no empty commit.
	_, err = Commit(repo, "clusters/shop.yaml", "prod", "shop", recs, "again")
	g.Expect(err).To(MatchError(ContainSubstring("already holds every recommended value")))
}

func TestDefaultBranch(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 30, 5, 0, time.FixedZone("CEST", 2*60*60))
	NewWithT(t).Expect(DefaultBranch("prod", "shop", at)).To(Equal("cacheops/recommend-prod-shop-20240501-103005"))
}

// Commit writes only inside the checkout it was given: a path that leaves
// it, by name or through a symbolic link, is refused and nothing outside
// changes.
func TestCommitStaysInsideTheCheckout(t *testing.T) {
	recs := []cachev1alpha1.Recommendation{{Field: "spec.config.maxmemory", Current: "100mb", Recommended: "152mb"}}
	outside := t.TempDir()
	target := filepath.Join(outside, "shop.yaml")
	if err := os.WriteFile(target, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(outside, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(repo, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"../shop.yaml", target, "link.yaml"} {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Commit(repo, path, "prod", "shop", recs, "b")
			g.Expect(err).To(HaveOccurred())
			data, err := os.ReadFile(target)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(data)).To(Equal(manifest), "the file outside the checkout is unchanged")
		})
	}
}
