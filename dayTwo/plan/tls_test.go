package plan

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// withRuns gives the pods of healthyCluster run IDs run-<name>.
func withRuns(pods []PodState) []PodState {
	for i := range pods {
		pods[i].Obs.RunID = "run-" + pods[i].Name
	}
	return pods
}

func served(serial, run string, at time.Time) ServedCert {
	return ServedCert{RunID: run, Serial: serial, CheckedAt: at, NotAfter: now.Add(time.Hour)}
}

func TestPlanTLS(t *testing.T) {
	steady := func(tls *TLSState) Snapshot {
		return steady(Snapshot{Now: now, ProbeTimeout: 5 * time.Second, CurrentMaster: "c-0", Pods: withRuns(healthyCluster()), TLS: tls})
	}
	all := func(serial string) map[string]ServedCert {
		return map[string]ServedCert{
			"c-0": served(serial, "run-c-0", now.Add(-time.Minute)),
			"c-1": served(serial, "run-c-1", now.Add(-time.Minute)),
			"c-2": served(serial, "run-c-2", now.Add(-time.Minute)),
		}
	}
	tests := []struct {
		name     string
		given    Snapshot
		wantType ActionType
		wantPod  string
		wantWhy  string
	}{
		{name: "no TLS: nothing", given: steady(nil), wantType: ActionNone},
		{name: "every pod serves the Secret's certificate", given: steady(&TLSState{Serial: "aa", Served: all("aa")}), wantType: ActionNone},
		{name: "a pod not looked at in this run is looked at, lowest ordinal first",
			given:    steady(&TLSState{Serial: "aa", Served: map[string]ServedCert{"c-0": served("aa", "run-c-0", now)}}),
			wantType: ActionReloadTLS, wantPod: "c-1", wantWhy: "look at"},
		{name: "a restarted pod (new run) is looked at again",
			given: func() Snapshot {
				s := steady(&TLSState{Serial: "aa", Served: all("aa")})
				s.Pods[2].Obs.RunID = "run-c-2-again"
				return s
			}(),
			wantType: ActionReloadTLS, wantPod: "c-2", wantWhy: "look at"},
		{name: "renewed: every pod reloads, the master first (lowest ordinal)",
			given:    steady(&TLSState{Serial: "bb", Served: all("aa")}),
			wantType: ActionReloadTLS, wantPod: "c-0", wantWhy: "serves certificate aa, the Secret holds bb"},
		{name: "a pod whose files were old a moment ago waits for the kubelet; the next pod goes on",
			given: steady(&TLSState{Serial: "bb", Served: map[string]ServedCert{
				"c-0": served("aa", "run-c-0", now.Add(-TLSReloadRetry/2)),
				"c-1": served("aa", "run-c-1", now.Add(-time.Minute)),
				"c-2": served("aa", "run-c-2", now.Add(-time.Minute)),
			}}),
			wantType: ActionReloadTLS, wantPod: "c-1"},
		{name: "every pod waits for the kubelet: nothing now, other rules go on",
			given: steady(&TLSState{Serial: "bb", Served: map[string]ServedCert{
				"c-0": served("aa", "run-c-0", now.Add(-time.Second)),
				"c-1": served("aa", "run-c-1", now.Add(-time.Second)),
				"c-2": served("aa", "run-c-2", now.Add(-time.Second)),
			}}),
			wantType: ActionNone},
		{name: "after the retry time a pod is asked again",
			given: steady(&TLSState{Serial: "bb", Served: map[string]ServedCert{
				"c-0": served("aa", "run-c-0", now.Add(-TLSReloadRetry)),
				"c-1": served("bb", "run-c-1", now.Add(-time.Second)),
				"c-2": served("bb", "run-c-2", now.Add(-time.Second)),
			}}),
			wantType: ActionReloadTLS, wantPod: "c-0"},
		{name: "an unreachable pod is skipped",
			given: func() Snapshot {
				s := steady(&TLSState{Serial: "bb", Served: map[string]ServedCert{"c-0": served("bb", "run-c-0", now), "c-1": served("bb", "run-c-1", now)}})
				s.Pods[2] = down(s.Pods[2], time.Second)
				return s
			}(),
			wantType: ActionNone},
		{name: "a failover goes first",
			given: func() Snapshot {
				s := steady(&TLSState{Serial: "bb", Served: all("aa")})
				s.Operation = failoverOp("c-0", "c-1")
				return s
			}(),
			wantType: ActionUnlabel, wantPod: "c-0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := Next(tt.given)
			g.Expect(got.Type).To(Equal(tt.wantType), got.String())
			if tt.wantPod != "" {
				g.Expect(got.Pod).To(Equal(tt.wantPod))
			}
			g.Expect(got.Reason).To(ContainSubstring(tt.wantWhy))
		})
	}
}

func TestTLSLoadedMessage(t *testing.T) {
	g := NewWithT(t)
	s := Snapshot{Name: "c", Now: now, Pods: withRuns(healthyCluster()), TLS: &TLSState{Serial: "bb", NotAfter: now.Add(time.Hour), Served: map[string]ServedCert{
		"c-0": served("bb", "run-c-0", now), "c-1": served("aa", "run-c-1", now),
	}}}
	ok, msg := TLSLoadedMessage(s)
	g.Expect(ok).To(BeFalse())
	g.Expect(msg).To(ContainSubstring("c-1 serves aa"))
	g.Expect(msg).NotTo(ContainSubstring("c-2"), "a pod not looked at yet does not count")
	g.Expect(TLSRecheck(s)).To(Equal(TLSReloadRetry))

	s.TLS.Served["c-1"] = served("bb", "run-c-1", now)
	ok, msg = TLSLoadedMessage(s)
	g.Expect(ok).To(BeTrue())
	g.Expect(strings.Contains(msg, "bb")).To(BeTrue())
	// The message holds no clock reading but the certificate's end.
	s.Now = now.Add(time.Minute)
	_, again := TLSLoadedMessage(s)
	g.Expect(again).To(Equal(msg))
}
