package daytwo

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

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

	// A failed master pre-empts a backup.
	s = backingUp(cluster(3, 0), BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupRunning, Running: true})
	s = setPod(s, "c-0", func(p *PodState) { p.Obs.Reachable = false; p.Obs.LastSeen = now.Add(-time.Minute) })
	g.Expect(Plan(s).Type).To(Equal(ActionStartFailover))
}
