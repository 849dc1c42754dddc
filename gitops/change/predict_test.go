package change

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
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

// predictFiles loads both files and predicts the change between them for
// a cluster whose master is master.
func predictFiles(g Gomega, base, head, master string) []ClusterPlan {
	before, err := Load(base, nil)
	g.Expect(err).NotTo(HaveOccurred())
	after, err := Load(head, nil)
	g.Expect(err).NotTo(HaveOccurred())
	plans, err := Predict(before, after, func(*cachev1alpha1.CacheCluster) Live { return Live{Master: master} })
	g.Expect(err).NotTo(HaveOccurred())
	return plans
}

func TestPredictTellsWhatAChangeDoes(t *testing.T) {
	dir := t.TempDir()
	base := writeFile(t, dir, "base.yaml", baseCluster)
	tests := []struct {
		name, head, master string
		check              func(Gomega, ClusterPlan)
	}{
		{
			name: "version bump", head: strings.Replace(baseCluster, `version: "7.0.15"`, "engine: valkey\n  version: \"8.0.1\"", 1),
			check: func(g Gomega, p ClusterPlan) {
				g.Expect(p.Operations).To(HaveLen(1))
				op := p.Operations[0]
				g.Expect(op.Description).To(Equal("engine redis 7.0.15→valkey 8.0.1: rolling restart; no rollback after the switchover: valkey 8.0.1 writes RDB 11, redis 7.0.15 reads RDB 10 at most"))
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
			head: strings.Replace(strings.Replace(baseCluster, `version: "7.0.15"`, "engine: valkey\n  version: \"8.0.1\"", 1), "replicas: 5", "replicas: 6", 1),
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
			plans := predictFiles(g, base, head, tt.master)
			g.Expect(plans).To(HaveLen(1))
			g.Expect(plans[0].Name).To(Equal("shop"))
			tt.check(g, plans[0])
		})
	}
}

// What the live cluster says reaches the reviewer as warnings, after the
// change's own.
func TestPredictAddsWhatTheLiveClusterSays(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	base := writeFile(t, dir, "base.yaml", baseCluster)
	head := writeFile(t, dir, "head.yaml", strings.Replace(baseCluster, "100mb", "200mb", 1)+"  paused: true\n")
	before, err := Load(base, nil)
	g.Expect(err).NotTo(HaveOccurred())
	after, err := Load(head, nil)
	g.Expect(err).NotTo(HaveOccurred())

	running := before["prod/shop"].DeepCopy()
	running.Status.CurrentMaster = "shop-2"
	running.Status.Phase = cachev1alpha1.PhaseDegraded
	running.Status.Operation = &cachev1alpha1.OperationStatus{Type: "Upgrade", ID: "op-1", Reason: "version 7.0.14→7.0.15"}
	var asked []string
	plans, err := Predict(before, after, func(cc *cachev1alpha1.CacheCluster) Live {
		asked = append(asked, cc.Namespace+"/"+cc.Name+" "+string(cc.Spec.Config["maxmemory"]))
		return LiveOf(running)
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(asked).To(Equal([]string{"prod/shop 100mb"}), "asked once, with the base side")
	g.Expect(plans).To(HaveLen(1))
	g.Expect(plans[0].Warnings).To(Equal([]string{
		"paused: the operator changes nothing while spec.paused is set",
		"live: Upgrade op-1 is in progress (version 7.0.14→7.0.15); this change runs after it",
		"live: the cluster is Degraded",
	}))

	g.Expect(Unread("prod", "shop", errors.New("forbidden")).Notes).To(Equal([]string{
		"live: prod/shop not read (forbidden); the master is assumed on ordinal 0",
	}))
}
