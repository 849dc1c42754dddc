package plan

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/robfig/cron/v3"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

func backingUp(s Snapshot, b BackupState) Snapshot {
	s = withOp(s, &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationBackup, Backup: b.Name})
	s.Backup = &b
	return s
}

func TestPlanBackups(t *testing.T) {
	g := NewWithT(t)

	// A pending backup starts when nothing else is to do.
	s := cluster(3, 0)
	s.PendingBackup = "c-1"
	a := Next(s)
	g.Expect(a.Type).To(Equal(ActionStartOperation))
	g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationBackup))
	g.Expect(a.Operation.Backup).To(Equal("c-1"))

	// A spec change goes first.
	s = cluster(3, 0)
	s.PendingBackup = "c-1"
	s.Spec.Engine, s.Spec.Version = cachev1alpha1.EngineValkey, "8.0.1"
	a = Next(s)
	g.Expect(a.Type).To(Equal(ActionStartOperation))
	g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationUpgrade))

	// A backup due during an upgrade waits, and the Queued condition says so.
	s = upgrading(cluster(3, 0))
	s.PendingBackup = "c-1"
	g.Expect(Next(s).Type).NotTo(Equal(ActionRunBackup))
	g.Expect(Queued(s)).To(ContainSubstring("backup c-1: waits for Upgrade op1"))

	// Streamed from the in-sync replica with the most data, never the
	// master while replicas exist.
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupPending})
	s = setPod(s, "c-2", func(p *PodState) { p.Obs.Offset = 200 })
	a = Next(s)
	g.Expect(a.Type).To(Equal(ActionRunBackup))
	g.Expect(a.Pod).To(Equal("c-2"))

	// The master when it is alone.
	s = backingUp(cluster(1, 0), BackupState{Name: "b", Exists: true})
	a = Next(s)
	g.Expect(a.Type).To(Equal(ActionRunBackup))
	g.Expect(a.Pod).To(Equal("c-0"))

	// No replica in sync: wait.
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true})
	for _, n := range []string{"c-1", "c-2"} {
		s = setPod(s, n, func(p *PodState) { p.Obs.MasterLinkUp = false })
	}
	g.Expect(Next(s).Type).To(Equal(ActionWait))

	// Streaming: wait. A failed attempt: wait until its retry time.
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupRunning, Running: true})
	g.Expect(Next(s).Type).To(Equal(ActionWait))
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupPending, RetryAt: now.Add(time.Second)})
	g.Expect(Next(s).Type).To(Equal(ActionWait))
	// Recorded Running but streamed by no one (the operator restarted):
	// started again.
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupRunning})
	g.Expect(Next(s).Type).To(Equal(ActionRunBackup))

	// Done, failed or deleted: the operation ends.
	for _, b := range []BackupState{{Name: "b", Exists: true, Phase: cachev1alpha1.BackupCompleted}, {Name: "b", Exists: true, Phase: cachev1alpha1.BackupFailed}, {Name: "b"}} {
		g.Expect(Next(backingUp(cluster(3, 0), b)).Type).To(Equal(ActionCompleteOperation), "%+v", b)
	}

	// Waiting (for a source, or to retry), a backup yields to a change
	// from git; it stays pending and runs after it.
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupPending, RetryAt: now.Add(time.Minute)})
	s.Spec.Config = map[string]cachev1alpha1.ConfigValue{"maxmemory": "64mb"}
	a = Next(s)
	g.Expect(a.Type).To(Equal(ActionCompleteOperation))
	g.Expect(a.Reason).To(ContainSubstring("waits for"))
	// Streaming, it finishes first.
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupRunning, Running: true})
	s.Spec.Config = map[string]cachev1alpha1.ConfigValue{"maxmemory": "64mb"}
	g.Expect(Next(s).Type).To(Equal(ActionWait))

	// A restored cluster is checked before its master gets the label.
	s = setPod(cluster(3, 0), "c-0", func(p *PodState) { p.RoleLabel = "" })
	s.RestorePending = true
	a = Next(s)
	g.Expect(a.Type).To(Equal(ActionVerifyRestore))
	g.Expect(a.Pod).To(Equal("c-0"))
	s.RestorePending = false
	g.Expect(Next(s).Type).To(Equal(ActionLabelMaster))

	// A failed master pre-empts a backup.
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupRunning, Running: true})
	s = setPod(s, "c-0", func(p *PodState) {
		p.Obs.Reachable = false
		p.Obs.LastSeen = now.Add(-time.Minute)
		p.Obs.MissedWait = time.Minute
	})
	g.Expect(Next(s).Type).To(Equal(ActionStartFailover))
}

func TestLatestDue(t *testing.T) {
	g := NewWithT(t)
	daily, _ := cron.ParseStandard("0 3 * * *")
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	due, ok := LatestDue(daily, at("2026-11-28T04:00:00Z"), at("2026-11-30T12:00:00Z"))
	g.Expect(ok).To(BeTrue())
	g.Expect(due).To(Equal(at("2026-11-30T03:00:00Z")), "one backup for the latest missed time")
	_, ok = LatestDue(daily, at("2026-11-30T03:00:00Z"), at("2026-11-30T12:00:00Z"))
	g.Expect(ok).To(BeFalse())
	// A year missed at @every 1s does not walk 31 million times.
	often, _ := cron.ParseStandard("@every 1s")
	due, ok = LatestDue(often, at("2025-11-30T12:00:00Z"), at("2026-11-30T12:00:00.5Z"))
	g.Expect(ok).To(BeTrue())
	g.Expect(due).To(Equal(at("2026-11-30T12:00:00Z")))
	// A date that never comes.
	never, _ := cron.ParseStandard("0 0 30 2 *")
	_, ok = LatestDue(never, at("2025-11-30T12:00:00Z"), at("2026-11-30T12:00:00Z"))
	g.Expect(ok).To(BeFalse())
}

// The source of a dump is an in-sync replica that can serve now, and the
// action says why it was chosen.
func TestPlanBackupSource(t *testing.T) {
	saving := func(p *PodState) { p.Obs.Saving = true }
	rewriting := func(p *PodState) { p.Obs.Rewriting = true }
	more := func(p *PodState) { p.Obs.Offset = 200 }
	unlinked := func(p *PodState) { p.Obs.MasterLinkUp = false }
	type change struct {
		pod string
		f   func(*PodState)
	}
	for _, tc := range []struct {
		name    string
		pods    int
		given   []change
		stalled []string
		want    string // pod; "" waits
		wantWhy string
	}{
		{name: "both idle: the most data", pods: 3, given: []change{{"c-2", more}},
			want: "c-2", wantWhy: "in sync and idle, with the most data"},
		{name: "equal offsets: the lowest ordinal", pods: 3,
			want: "c-1", wantWhy: "in sync and idle, with the most data"},
		{name: "the one with the most data saves: the other", pods: 3, given: []change{{"c-2", more}, {"c-2", saving}},
			want: "c-1", wantWhy: "in sync and idle (c-2 is busy with a background save)"},
		{name: "an AOF rewrite is busy too", pods: 3, given: []change{{"c-1", rewriting}},
			want: "c-2", wantWhy: "in sync and idle (c-1 is busy with an AOF rewrite)"},
		{name: "an idle replica that stalled before beats a busy one", pods: 3, given: []change{{"c-2", saving}}, stalled: []string{"c-1"},
			want: "c-1", wantWhy: "idle now, although it stalled an earlier attempt (c-2 is busy with a background save)"},
		{name: "the one that stalled is passed over", pods: 3, given: []change{{"c-1", more}}, stalled: []string{"c-1"},
			want: "c-2", wantWhy: "in sync and idle (c-1 stalled an earlier attempt)"},
		{name: "every replica busy: the best of them, saying so", pods: 3, given: []change{{"c-1", saving}, {"c-2", saving}, {"c-2", rewriting}, {"c-2", more}},
			want: "c-2", wantWhy: "every in-sync replica is busy (c-2 is busy with a background save and an AOF rewrite; c-1 is busy with a background save); c-2 ranks first"},
		{name: "every replica busy, one stalled: the other", pods: 3, given: []change{{"c-1", saving}, {"c-2", saving}}, stalled: []string{"c-1"},
			want: "c-2", wantWhy: "every in-sync replica is busy (c-2 is busy with a background save; c-1 is busy with a background save and stalled an earlier attempt); c-2 ranks first"},
		{name: "a busy replica out of sync is no choice", pods: 3, given: []change{{"c-1", unlinked}, {"c-2", saving}},
			want: "c-2", wantWhy: "the only in-sync replica, although it is busy with a background save"},
		{name: "the only in-sync replica stalled before", pods: 3, given: []change{{"c-2", unlinked}}, stalled: []string{"c-1"},
			want: "c-1", wantWhy: "the only in-sync replica, although it stalled an earlier attempt; it is idle now"},
		{name: "the master is never a source while replicas exist", pods: 3, given: []change{{"c-1", unlinked}, {"c-2", unlinked}}},
		{name: "the master alone, busy or not", pods: 1, given: []change{{"c-0", saving}},
			want: "c-0", wantWhy: "the only pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := backingUp(cluster(tc.pods, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupPending, Stalled: tc.stalled})
			for _, c := range tc.given {
				s = setPod(s, c.pod, c.f)
			}
			a := Next(s)
			if tc.want == "" {
				g.Expect(a.Type).To(Equal(ActionWait))
				return
			}
			g.Expect(a.Type).To(Equal(ActionRunBackup), a.String())
			g.Expect(a.Pod).To(Equal(tc.want))
			g.Expect(a.Reason).To(Equal("backup b from " + tc.want + ": " + tc.wantWhy))
		})
	}
}
