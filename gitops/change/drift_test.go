package change

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// decodeOne decodes a manifest holding one CacheCluster.
func decodeOne(g Gomega, manifest string) *cachev1alpha1.CacheCluster {
	ccs, err := DecodeManifest([]byte(manifest))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ccs).To(HaveLen(1))
	return ccs[0]
}

// The API server fills in the CRD's defaults; a manifest that leaves them
// out is no drift, a field changed outside git is, named with both values.
func TestDriftComparesWithTheDefaults(t *testing.T) {
	g := NewWithT(t)
	git := decodeOne(g, baseCluster)
	g.Expect(git.Spec.Storage.Size).To(BeNil(), "the manifest leaves storage.size to its default")

	live, err := WithDefaults(git)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(live.Spec.Storage.Size).NotTo(BeNil())
	g.Expect(live.Spec.Storage.Size.String()).To(Equal("1Gi"))
	g.Expect(live.Spec.Network.ServiceType).To(BeEquivalentTo("ClusterIP"))

	d, err := Drift(git, live)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d).To(BeEmpty(), "defaults alone are no drift")

	live.Spec.Replicas = ptr.To[int32](7)
	live.Spec.Config["maxmemory-policy"] = "allkeys-lru"
	delete(live.Spec.Config, "maxmemory")
	d, err = Drift(git, live)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d).To(Equal([]string{
		"spec.config.maxmemory-policy: allkeys-lru live, unset in git",
		"spec.config.maxmemory: unset live, 100mb in git",
		"spec.replicas: 7 live, 5 in git",
	}))
}

// With the live object, a change is planned from what runs: a pull request
// from 5 to 3 replicas on a cluster scaled to 6 outside git removes three
// pods, and the plan says why it differs from the diff in git.
func TestPredictStartsFromTheLiveSpec(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	base := writeFile(t, dir, "base.yaml", baseCluster)
	head := writeFile(t, dir, "head.yaml", strings.Replace(baseCluster, "replicas: 5", "replicas: 3", 1))
	before, err := Load(base, nil)
	g.Expect(err).NotTo(HaveOccurred())
	after, err := Load(head, nil)
	g.Expect(err).NotTo(HaveOccurred())

	running, err := WithDefaults(before["prod/shop"])
	g.Expect(err).NotTo(HaveOccurred())
	running.Spec.Replicas = ptr.To[int32](6)
	running.Status.CurrentMaster = "shop-0"
	running.Status.Phase = cachev1alpha1.PhaseRunning

	gitOnly, err := Predict(before, after, func(*cachev1alpha1.CacheCluster) Live { return Live{} })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gitOnly[0].Operations[0].Description).To(HavePrefix("replicas 5→3"))
	g.Expect(gitOnly[0].Drift).To(BeEmpty())

	plans, err := Predict(before, after, func(*cachev1alpha1.CacheCluster) Live { return LiveOf(running) })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plans).To(HaveLen(1))
	g.Expect(plans[0].Drift).To(Equal([]string{"spec.replicas: 6 live, 5 in git"}))
	g.Expect(plans[0].Operations).To(HaveLen(1))
	g.Expect(plans[0].Operations[0].Description).To(HavePrefix("replicas 6→3"))
	g.Expect(plans[0].Objects).To(ContainElement(HaveField("Object", "StatefulSet/shop")))

	var text strings.Builder
	WriteText(&text, plans)
	g.Expect(text.String()).To(ContainSubstring("  DRIFT    the live spec differs from --base; this plan starts from the live spec:\n             spec.replicas: 6 live, 5 in git\n"))

	// A live cluster already at the head's spec: nothing to do, and said so.
	running.Spec.Replicas = ptr.To[int32](3)
	plans, err = Predict(before, after, func(*cachev1alpha1.CacheCluster) Live { return LiveOf(running) })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plans[0].Operations).To(BeEmpty())
	g.Expect(plans[0].Objects).To(BeEmpty())
	g.Expect(plans[0].Warnings).To(ContainElement("live: the cluster already runs the spec of --head; merging changes nothing"))
}
