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

func planJSON(t *testing.T, g Gomega, args ...string) []ClusterPlan {
	t.Helper()
	var out bytes.Buffer
	g.Expect(run(append([]string{"plan", "--format", "json"}, args...), nil, &out)).To(Succeed())
	var plans []ClusterPlan
	g.Expect(json.Unmarshal(out.Bytes(), &plans)).To(Succeed(), out.String())
	return plans
}

func TestPlanTellsWhatAChangeDoes(t *testing.T) {
	dir := t.TempDir()
	base := writeFile(t, dir, "base.yaml", baseCluster)
	tests := []struct {
		name, head, master string
		check              func(Gomega, ClusterPlan)
	}{
		{
			name: "version bump", head: strings.Replace(baseCluster, `"7.0.15"`, `"7.2.4"`, 1),
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Operations).To(HaveLen(1))
				op := p.Operations[0]
				g.Expect(op.Description).To(Equal("version 7.0.15→7.2.4: rolling restart"))
				g.Expect(op.Restarts).To(Equal([]string{"shop-4", "shop-3", "shop-2", "shop-1", "shop-0"}))
				g.Expect(op.Switchovers).To(Equal([]string{"shop-0→shop-1"}))
				g.Expect(p.Objects).To(ContainElement(HaveField("Object", "StatefulSet/shop")))
			},
		},
		{
			name: "scale-down with the master on an ordinal that goes", head: strings.Replace(baseCluster, "replicas: 5", "replicas: 3", 1), master: "shop-4",
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Operations).To(HaveLen(1))
				g.Expect(p.Operations[0].Description).To(Equal("replicas 5→3: switchover first, the master is on ordinal 4"))
				g.Expect(p.Operations[0].Switchovers).To(Equal([]string{"shop-4→shop-0"}))
				g.Expect(p.Operations[0].Restarts).To(BeEmpty())
			},
		},
		{
			name: "a live parameter", head: strings.Replace(baseCluster, "100mb", "200mb", 1),
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Operations).To(HaveLen(1))
				g.Expect(p.Operations[0].Description).To(Equal("maxmemory 100mb→200mb: applied live, no restart"))
				g.Expect(p.Operations[0].Restarts).To(BeEmpty())
			},
		},
		{
			name: "storage class", head: baseCluster + "  storage:\n    className: fast\n",
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Rejected).To(ConsistOf(ContainSubstring("storage.className: rejected at admission, it is immutable")))
			},
		},
		{
			name: "autoRestore adds the restore init container: the pods restart onto it",
			head: baseCluster + "  backup:\n    autoRestore: true\n    s3: {endpoint: s3.example.com, bucket: backups, credentialsSecret: s3}\n",
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Operations).To(HaveLen(1))
				g.Expect(p.Operations[0].Type).To(Equal("Upgrade"))
				g.Expect(p.Operations[0].Restarts).To(HaveLen(5))
				g.Expect(p.Objects).To(ContainElement(HaveField("Object", "ConfigMap/shop-restore")))
			},
		},
		{
			name: "a volume backup target adds the backup store, no pod restarts",
			head: baseCluster + "  backup:\n    pvc: {claimName: backups}\n",
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Operations).To(HaveLen(1))
				g.Expect(p.Operations[0].Description).To(Equal("objects change; no pod restarts"))
				g.Expect(p.Operations[0].Restarts).To(BeEmpty())
				g.Expect(p.Objects).To(ContainElement(HaveField("Object", "StatefulSet/shop-backup-store")))
				g.Expect(p.Objects).To(ContainElement(HaveField("Object", "NetworkPolicy/shop-backup-store")))
			},
		},
		{
			name: "a change and a queued change run one after the other",
			head: strings.Replace(strings.Replace(baseCluster, `"7.0.15"`, `"7.2.4"`, 1), "replicas: 5", "replicas: 6", 1),
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Operations).To(HaveLen(2))
				g.Expect(p.Operations[0].Type).To(Equal("Upgrade"))
				g.Expect(p.Operations[1].Description).To(Equal("replicas 5→6"))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			head := writeFile(t, t.TempDir(), "head.yaml", tt.head)
			args := []string{"--base", base, "--head", head}
			if tt.master != "" {
				args = append(args, "--master", tt.master)
			}
			plans := planJSON(t, g, args...)
			g.Expect(plans).To(HaveLen(1))
			g.Expect(plans[0].Name).To(Equal("shop"))
			tt.check(g, plans[0])
		})
	}
}

// plan reads both sides from git revisions, as in a pull request's CI.
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
	writeFile(t, repo, "shop.yaml", strings.Replace(baseCluster, `"7.0.15"`, `"7.2.4"`, 1))
	gitIn("commit", "-qam", "bump")

	wd, _ := os.Getwd()
	g.Expect(os.Chdir(repo)).To(Succeed())
	defer os.Chdir(wd)
	plans := planJSON(t, g, "--base", "HEAD~1", "--head", "HEAD")
	g.Expect(plans).To(HaveLen(1), "only the changed cluster")
	g.Expect(plans[0].Operations[0].Type).To(Equal("Upgrade"))

	var md bytes.Buffer
	g.Expect(run([]string{"plan", "--base", "HEAD~1", "--head", "HEAD", "--format", "markdown"}, nil, &md)).To(Succeed())
	g.Expect(md.String()).To(ContainSubstring("| 1 | Upgrade | version 7.0.15→7.2.4: rolling restart | 5 pod restarts (shop-4, shop-3, shop-2, shop-1, shop-0), 1 switchover (shop-0→shop-1) |"))
	g.Expect(md.String()).To(ContainSubstring("```diff"))
}
