package change

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// gitRepo makes a repository in a temporary folder, chdirs into it (as a
// pull request's CI runs in its checkout) and returns a git runner.
func gitRepo(t *testing.T, g Gomega) (string, func(args ...string) string) {
	t.Helper()
	repo := t.TempDir()
	gitIn := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		return strings.TrimSpace(string(out))
	}
	gitIn("init", "-q", "-b", "main")
	t.Chdir(repo)
	return repo, gitIn
}

// Both sides come from git revisions, as in a pull request's CI; the
// markdown is what the pull request shows.
func TestLoadBetweenGitRevisions(t *testing.T) {
	g := NewWithT(t)
	repo, gitIn := gitRepo(t, g)
	writeFile(t, repo, "shop.yaml", baseCluster)
	writeFile(t, repo, "other.yaml", strings.Replace(baseCluster, "name: shop", "name: other", 1))
	gitIn("add", ".")
	gitIn("commit", "-qm", "base")
	writeFile(t, repo, "shop.yaml", strings.Replace(baseCluster, `version: "7.0.15"`, "engine: valkey\n  version: \"8.0.1\"", 1))
	gitIn("commit", "-qam", "bump")

	before, err := Load("HEAD~1", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(before).To(HaveKey("prod/other"))
	after, err := Load("HEAD", nil)
	g.Expect(err).NotTo(HaveOccurred())
	plans, err := Predict(before, after, func(*cachev1alpha1.CacheCluster) Live { return Live{} })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plans).To(HaveLen(1), "only the changed cluster")
	g.Expect(plans[0].Operations[0].Type).To(Equal("Upgrade"))

	var md bytes.Buffer
	WriteMarkdown(&md, plans)
	g.Expect(md.String()).To(HavePrefix("### cacheops plan\n\n#### `prod/shop` — changed\n\n"))
	g.Expect(md.String()).To(ContainSubstring("| 1 | Upgrade | engine redis 7.0.15→valkey 8.0.1: rolling restart; no rollback after the switchover: valkey 8.0.1 writes RDB 11, redis 7.0.15 reads RDB 10 at most | 5 pod restarts (shop-4, shop-3, shop-2, shop-1, shop-0), 1 switchover (shop-0→shop-1) |"))
	g.Expect(md.String()).To(ContainSubstring("<details><summary>1 rendered object change</summary>\n\n```diff\n--- base/StatefulSet/shop\n+++ head/StatefulSet/shop\n"))

	var text bytes.Buffer
	WriteText(&text, plans)
	g.Expect(text.String()).To(HavePrefix("CacheCluster prod/shop: changed\n  1. Upgrade: engine redis 7.0.15→valkey 8.0.1: rolling restart; no rollback after the switchover: valkey 8.0.1 writes RDB 11, redis 7.0.15 reads RDB 10 at most — 5 pod restarts (shop-4, shop-3, shop-2, shop-1, shop-0), 1 switchover (shop-0→shop-1)\n  changes "))
}

// Named paths limit what a revision reads; a path absent at a revision is
// no cluster there, and a name that is no file, folder or revision is an
// error.
func TestLoadNamedPathsOfARevision(t *testing.T) {
	g := NewWithT(t)
	repo, gitIn := gitRepo(t, g)
	writeFile(t, repo, "shop.yaml", baseCluster)
	writeFile(t, repo, "other.yaml", strings.Replace(baseCluster, "name: shop", "name: other", 1))
	gitIn("add", ".")
	gitIn("commit", "-qm", "base")

	got, err := Load("HEAD", []string{"shop.yaml", "absent.yaml"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(HaveLen(1))
	g.Expect(got).To(HaveKey("prod/shop"))

	_, err = Load("no-such-revision", nil)
	g.Expect(err).To(MatchError("neither a file, a folder nor a git revision here"))

	var text bytes.Buffer
	WriteText(&text, nil)
	g.Expect(text.String()).To(Equal("No CacheCluster changes.\n"))
}
