package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/cacheops/cacheops/gitops/change"
)

const baseCluster = `apiVersion: cache.cacheops.io/v1alpha1
kind: CacheCluster
metadata:
  name: shop
  namespace: prod
spec:
  version: "7.0.15"
  replicas: 5
  config:
    maxmemory: 100mb
`

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func planJSON(t *testing.T, g Gomega, args ...string) []change.ClusterPlan {
	t.Helper()
	var out bytes.Buffer
	g.Expect(run(append([]string{"plan", "--format", "json"}, args...), nil, &out)).To(Succeed())
	var plans []change.ClusterPlan
	g.Expect(json.Unmarshal(out.Bytes(), &plans)).To(Succeed(), out.String())
	return plans
}

// plan reads both sides from git revisions, as in a pull request's CI, and
// prints the formats the flags ask for (what a change does is tested in
// package change).
func TestPlanBetweenGitRevisions(t *testing.T) {
	g := NewWithT(t)
	repo := t.TempDir()
	gitIn := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		return strings.TrimSpace(string(out))
	}
	gitIn("init", "-q", "-b", "main")
	writeFile(t, repo, "shop.yaml", baseCluster)
	writeFile(t, repo, "other.yaml", strings.Replace(baseCluster, "name: shop", "name: other", 1))
	gitIn("add", ".")
	gitIn("commit", "-qm", "base")
	writeFile(t, repo, "shop.yaml", strings.Replace(baseCluster, `version: "7.0.15"`, "engine: valkey\n  version: \"8.0.1\"", 1))
	gitIn("commit", "-qam", "bump")

	wd, _ := os.Getwd()
	g.Expect(os.Chdir(repo)).To(Succeed())
	defer os.Chdir(wd)
	plans := planJSON(t, g, "--base", "HEAD~1", "--head", "HEAD")
	g.Expect(plans).To(HaveLen(1), "only the changed cluster")
	g.Expect(plans[0].Operations[0].Type).To(Equal("Upgrade"))

	var md bytes.Buffer
	g.Expect(run([]string{"plan", "--base", "HEAD~1", "--head", "HEAD", "--format", "markdown"}, nil, &md)).To(Succeed())
	g.Expect(md.String()).To(ContainSubstring("| 1 | Upgrade | engine redis 7.0.15→valkey 8.0.1: rolling restart; no rollback after the switchover: valkey 8.0.1 writes RDB 11, redis 7.0.15 reads RDB 10 at most | 5 pod restarts (shop-4, shop-3, shop-2, shop-1, shop-0), 1 switchover (shop-0→shop-1) |"))
	g.Expect(md.String()).To(ContainSubstring("```diff"))
}

func TestPlanFlags(t *testing.T) {
	dir := t.TempDir()
	base := writeFile(t, dir, "base.yaml", baseCluster)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "no head", args: []string{"--base", base}, wantErr: planUsage},
		{name: "master and live", args: []string{"--base", base, "--head", base, "--master", "shop-1", "--live"}, wantErr: "--master and --live exclude each other"},
		{name: "unknown format", args: []string{"--base", base, "--head", base, "--format", "xml"}, wantErr: `unknown --format "xml" (text, markdown or json)`},
		{name: "a side that is nothing", args: []string{"--base", filepath.Join(dir, "absent"), "--head", base}, wantErr: "--base " + filepath.Join(dir, "absent") + ": neither a file, a folder nor a git revision here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(append([]string{"plan"}, tt.args...), nil, &bytes.Buffer{})
			NewWithT(t).Expect(err).To(MatchError(tt.wantErr))
		})
	}

	var out bytes.Buffer
	NewWithT(t).Expect(run([]string{"plan", "--base", base, "--head", base}, nil, &out)).To(Succeed())
	NewWithT(t).Expect(out.String()).To(Equal("No CacheCluster changes.\n"))
}
