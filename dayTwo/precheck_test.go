package daytwo

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/renderer"
)

// precheckState reads the seed init container's report, or why it failed,
// and quotes a server's refusal (the log end the kubelet puts in the
// termination message).
func TestPrecheckStateReadsTheSeed(t *testing.T) {
	seeded := func(init corev1.ContainerStatus, server corev1.ContainerStatus, ready bool) *corev1.Pod {
		p := &corev1.Pod{}
		p.Spec.InitContainers = []corev1.Container{{Name: renderer.SeedContainerName}}
		init.Name = renderer.SeedContainerName
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{init}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{server}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	done := func(code int32, msg string) corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}
	}
	running := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	waiting := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}
	tests := []struct {
		name        string
		given       *corev1.Pod
		wantSeed    *plan.SeedState
		wantFailure string
		wantReady   bool
	}{
		{
			name:      "copied and ready",
			given:     seeded(done(0, "keys=12 expiring=2 db=0 rdb=10 size=300 source=10.0.0.2:6379"), running, true),
			wantSeed:  &plan.SeedState{Source: "10.0.0.2:6379", Keys: 12, ExpiringKeys: 2, Loaded: -1},
			wantReady: true,
		},
		{name: "copying", given: seeded(running, waiting, false)},
		{
			name:        "the copy failed",
			given:       seeded(done(1, "copying the data of 10.0.0.2:6379: AUTH on 10.0.0.2:6379: WRONGPASS"), waiting, false),
			wantFailure: "the copy of the cluster's data for the pre-check could not be taken (exit code 1): copying the data of 10.0.0.2:6379: AUTH on 10.0.0.2:6379: WRONGPASS",
		},
		{
			name:        "a report without its fields",
			given:       seeded(done(0, "hello"), running, true),
			wantFailure: "the copy of the cluster's data for the pre-check reported no key count: seed report \"hello\" lacks fields",
		},
		{
			name: "the server refuses the copy",
			given: seeded(done(0, "keys=12 expiring=0 db=9 rdb=10 size=300 source=10.0.0.2:6379"),
				done(1, "# FATAL: Data file was created with a Valkey server configured to handle more than 4 databases. Exiting"), false),
			wantSeed:    &plan.SeedState{Source: "10.0.0.2:6379", Keys: 12, DB: 9, Loaded: -1},
			wantFailure: "the server process of the pre-check pod exited with code 1 () # FATAL: Data file was created with a Valkey server configured to handle more than 4 databases. Exiting; see its log: kubectl logs ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := precheckState(tt.given)
			g.Expect(got.Seed).To(Equal(tt.wantSeed))
			g.Expect(got.Failure).To(Equal(tt.wantFailure))
			g.Expect(got.Ready).To(Equal(tt.wantReady))
		})
	}
}
