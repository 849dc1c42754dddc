package argocd

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"
)

// Flux and every kstatus consumer read the same objects as Argo CD: what
// Argo CD calls Progressing must be InProgress, Degraded by a stall must be
// Failed, Healthy must be Current.
func TestKstatusAgreesWithTheHealthCheck(t *testing.T) {
	tests := []struct {
		file string
		want status.Status
	}{
		{"deleting.yaml", status.TerminatingStatus},
		{"spec-not-observed.yaml", status.InProgressStatus},
		{"initializing.yaml", status.InProgressStatus},
		{"scaling.yaml", status.InProgressStatus},
		{"upgrading.yaml", status.InProgressStatus},
		{"stalled-auth-secret-missing.yaml", status.FailedStatus},
		{"stalled-apply-failed.yaml", status.FailedStatus},
		{"running.yaml", status.CurrentStatus},
		{"backup-running.yaml", status.CurrentStatus},
		// Captured from live objects by the end-to-end suite.
		{"captured-deleting.yaml", status.TerminatingStatus},
		{"captured-initializing.yaml", status.InProgressStatus},
		{"captured-running.yaml", status.CurrentStatus},
		{"captured-paused.yaml", status.CurrentStatus},
		{"captured-degraded.yaml", status.InProgressStatus},
		{"captured-failed-majority-down.yaml", status.FailedStatus},
		{"captured-stalled-auth-secret-missing.yaml", status.FailedStatus},
		{"captured-scaling.yaml", status.InProgressStatus},
		{"captured-upgrading.yaml", status.InProgressStatus},
		{"captured-upgrading-with-queued-change.yaml", status.InProgressStatus},
		{"captured-stalled-precheck-failed.yaml", status.FailedStatus},
		{"captured-stalled-rolled-back.yaml", status.FailedStatus},
		{"captured-backup-running.yaml", status.CurrentStatus},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			g := NewWithT(t)
			data, err := os.ReadFile(filepath.Join("cache.cacheops.io", "CacheCluster", "testdata", tt.file))
			g.Expect(err).NotTo(HaveOccurred())
			obj := &unstructured.Unstructured{}
			js, err := yaml.YAMLToJSON(data)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(obj.UnmarshalJSON(js)).To(Succeed())
			res, err := status.Compute(obj)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(tt.want), res.Message)
		})
	}
}
