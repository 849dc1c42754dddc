package daytwo

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
	a := Plan(s)
	g.Expect(a.Type).To(Equal(ActionStartOperation))
	g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationBackup))
	g.Expect(a.Operation.Backup).To(Equal("c-1"))

	// A spec change goes first.
	s = cluster(3, 0)
	s.PendingBackup = "c-1"
	s.Spec.Version = "7.2.4"
	a = Plan(s)
	g.Expect(a.Type).To(Equal(ActionStartOperation))
	g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationUpgrade))

	// A backup due during an upgrade waits, and the Queued condition says so.
	s = upgrading(cluster(3, 0))
	s.PendingBackup = "c-1"
	g.Expect(Plan(s).Type).NotTo(Equal(ActionRunBackup))
	g.Expect(Queued(s)).To(ContainSubstring("backup c-1: waits for Upgrade op1"))

	// Streamed from the in-sync replica with the most data, never the
	// master while replicas exist.
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupPending})
	s = setPod(s, "c-2", func(p *PodState) { p.Obs.Offset = 200 })
	a = Plan(s)
	g.Expect(a.Type).To(Equal(ActionRunBackup))
	g.Expect(a.Pod).To(Equal("c-2"))

	// The master when it is alone.
	s = backingUp(cluster(1, 0), BackupState{Name: "b", Exists: true})
	a = Plan(s)
	g.Expect(a.Type).To(Equal(ActionRunBackup))
	g.Expect(a.Pod).To(Equal("c-0"))

	// No replica in sync: wait.
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true})
	for _, n := range []string{"c-1", "c-2"} {
		s = setPod(s, n, func(p *PodState) { p.Obs.MasterLinkUp = false })
	}
	g.Expect(Plan(s).Type).To(Equal(ActionWait))

	// Streaming: wait. A failed attempt: wait until its retry time.
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupRunning, Running: true})
	g.Expect(Plan(s).Type).To(Equal(ActionWait))
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupPending, RetryAt: now.Add(time.Second)})
	g.Expect(Plan(s).Type).To(Equal(ActionWait))
	// Recorded Running but streamed by no one (the operator restarted):
	// started again.
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupRunning})
	g.Expect(Plan(s).Type).To(Equal(ActionRunBackup))

	// Done, failed or deleted: the operation ends.
	for _, b := range []BackupState{{Name: "b", Exists: true, Phase: cachev1alpha1.BackupCompleted}, {Name: "b", Exists: true, Phase: cachev1alpha1.BackupFailed}, {Name: "b"}} {
		g.Expect(Plan(backingUp(cluster(3, 0), b)).Type).To(Equal(ActionCompleteOperation), "%+v", b)
	}

	// Waiting (for a source, or to retry), a backup yields to a change
	// from git; it stays pending and runs after it.
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupPending, RetryAt: now.Add(time.Minute)})
	s.Spec.Config = map[string]cachev1alpha1.ConfigValue{"maxmemory": "64mb"}
	a = Plan(s)
	g.Expect(a.Type).To(Equal(ActionCompleteOperation))
	g.Expect(a.Reason).To(ContainSubstring("waits for"))
	// Streaming, it finishes first.
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupRunning, Running: true})
	s.Spec.Config = map[string]cachev1alpha1.ConfigValue{"maxmemory": "64mb"}
	g.Expect(Plan(s).Type).To(Equal(ActionWait))

	// A restored cluster is checked before its master gets the label.
	s = setPod(cluster(3, 0), "c-0", func(p *PodState) { p.RoleLabel = "" })
	s.RestorePending = true
	a = Plan(s)
	g.Expect(a.Type).To(Equal(ActionVerifyRestore))
	g.Expect(a.Pod).To(Equal("c-0"))
	s.RestorePending = false
	g.Expect(Plan(s).Type).To(Equal(ActionLabelMaster))

	// A failed master pre-empts a backup.
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupRunning, Running: true})
	s = setPod(s, "c-0", func(p *PodState) { p.Obs.Reachable = false; p.Obs.LastSeen = now.Add(-time.Minute) })
	g.Expect(Plan(s).Type).To(Equal(ActionStartFailover))
}

func TestLatestDue(t *testing.T) {
	g := NewWithT(t)
	daily, _ := cron.ParseStandard("0 3 * * *")
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	due, ok := latestDue(daily, at("2026-11-28T04:00:00Z"), at("2026-11-30T12:00:00Z"))
	g.Expect(ok).To(BeTrue())
	g.Expect(due).To(Equal(at("2026-11-30T03:00:00Z")), "one backup for the latest missed time")
	_, ok = latestDue(daily, at("2026-11-30T03:00:00Z"), at("2026-11-30T12:00:00Z"))
	g.Expect(ok).To(BeFalse())
	// A year missed at @every 1s does not walk 31 million times.
	often, _ := cron.ParseStandard("@every 1s")
	due, ok = latestDue(often, at("2025-11-30T12:00:00Z"), at("2026-11-30T12:00:00.5Z"))
	g.Expect(ok).To(BeTrue())
	g.Expect(due).To(Equal(at("2026-11-30T12:00:00Z")))
	// A date that never comes.
	never, _ := cron.ParseStandard("0 0 30 2 *")
	_, ok = latestDue(never, at("2025-11-30T12:00:00Z"), at("2026-11-30T12:00:00Z"))
	g.Expect(ok).To(BeFalse())
}
