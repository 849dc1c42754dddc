package plan

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// wiped: every pod of a 3-pod cluster came back empty; lost names those
// whose previous run held keys.
func wiped(lost ...string) Snapshot {
	s := cluster(3, 0)
	for i := range s.Pods {
		s.Pods[i].Obs.Keys, s.Pods[i].Obs.Offset = 0, 0
		for _, l := range lost {
			if s.Pods[i].Name == l {
				s.Pods[i].Obs.LostData = true
			}
		}
	}
	return s
}

func latest() *RestorePoint {
	return &RestorePoint{Name: "c-20261130110000", Taken: now.Add(-time.Hour), Location: cachev1alpha1.BackupLocation{Key: "ns/c/c-20261130110000.rdb"}}
}

// restoring: a Restore operation at step, the ConfigMap and StatefulSet
// ready for it.
func restoring(s Snapshot, step string) Snapshot {
	s = withOp(s, &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationRestore, Backup: "c-20261130110000", Step: step})
	s.RestoreConfig = &RestoreConfig{State: "pending", Replace: "op1"}
	s.StatefulSet.RestoreInit = true
	s.LatestBackup = latest()
	s.AutoRestore = true
	for i := range s.Pods {
		s.Pods[i].RoleLabel = ""
		s.Pods[i].Ready = true
	}
	return s
}

func TestPlanDataLoss(t *testing.T) {
	recreated := func(s Snapshot) Snapshot {
		for i := range s.Pods {
			s.Pods[i].Created = now
		}
		return s
	}
	runPlanCases(t, []planCase{
		{name: "one wiped replica of three is no loss: the others hold the data", given: setPod(cluster(3, 0), "c-2", func(p *PodState) { p.Obs.Keys, p.Obs.LostData = 0, true }), want: ActionNone},
		{name: "an emptied cluster that kept running is no loss (FLUSHALL)", given: wiped(), want: ActionNone},
		{name: "one pod of three lost and none holds data is no loss: not a majority", given: wiped("c-1"), want: ActionNone},
		{
			name:  "two of three lost, none holds data: reported, with the latest backup and how to restore it",
			given: func() Snapshot { s := wiped("c-0", "c-1"); s.LatestBackup = latest(); return s }(), want: ActionReportDataLoss,
			check: func(g Gomega, a Action) {
				g.Expect(a.Reason).To(ContainSubstring("2 of 3 pods (c-0, c-1) came back without their data"))
				g.Expect(a.Reason).To(ContainSubstring("spec.backup.autoRestore: true"))
				g.Expect(a.Reason).To(ContainSubstring("spec.restore.backup: c-20261130110000"))
				g.Expect(a.Reason).To(ContainSubstring("2026-11-30T11:00:00Z"))
			},
		},
		{
			name: "a loss without any backup says so", given: wiped("c-0", "c-1", "c-2"), want: ActionReportDataLoss,
			check: func(g Gomega, a Action) { g.Expect(a.Reason).To(ContainSubstring("no completed backup")) },
		},
		{name: "a pod that does not answer may hold the data: wait for it", given: func() Snapshot { s := wiped("c-0", "c-1"); s.Pods[2] = down(s.Pods[2], time.Minute); return s }(), want: ActionNone},
		{name: "a reported loss is reported once; the cluster serves meanwhile", given: func() Snapshot { s := wiped("c-0", "c-1"); s.DataLost = true; return s }(), want: ActionNone},
		{
			name: "autoRestore with a backup starts a restore", given: func() Snapshot { s := wiped("c-0", "c-1"); s.AutoRestore, s.LatestBackup = true, latest(); return s }(), want: ActionStartRestore,
			check: func(g Gomega, a Action) {
				g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationRestore))
				g.Expect(a.Operation.Backup).To(Equal("c-20261130110000"))
				g.Expect(a.Reason).To(ContainSubstring("writes after it are lost"))
			},
		},
		{name: "autoRestore turned on after a reported loss restores", given: func() Snapshot {
			s := cluster(3, 0)
			s.DataLost, s.AutoRestore, s.LatestBackup = true, true, latest()
			return s
		}(), want: ActionStartRestore},
		{name: "autoRestore without any backup reports the loss", given: func() Snapshot { s := wiped("c-0", "c-1"); s.AutoRestore = true; return s }(), want: ActionReportDataLoss},
		{name: "a missing pod may come back with the data: no loss yet", given: func() Snapshot { s := wiped("c-0", "c-1"); s.Pods = s.Pods[:2]; return s }(), want: ActionNone},
		{
			name: "a restore that failed its check is not tried again", given: func() Snapshot {
				s := wiped("c-0", "c-1")
				s.DataLost, s.RestoreFailed, s.AutoRestore, s.LatestBackup = true, true, true, latest()
				return s
			}(), want: ActionNone,
		},
		{
			name: "another operation in progress: the loss is recorded now, the restore follows it", given: func() Snapshot {
				s := upgrading(wiped("c-0", "c-1"))
				s.AutoRestore, s.LatestBackup = true, latest()
				return s
			}(), want: ActionReportDataLoss,
			check: func(g Gomega, a Action) {
				g.Expect(a.Reason).To(ContainSubstring("is restored when the Upgrade operation in progress ends"))
			},
		},
		{
			name: "another operation in progress, the loss recorded: the operation goes on", given: func() Snapshot {
				s := upgrading(wiped("c-0", "c-1"))
				s.AutoRestore, s.LatestBackup, s.DataLost = true, latest(), true
				return s
			}(), want: ActionRestartPod,
		},
		{
			name: "keys written to the pods since they lost their data are not the data", given: func() Snapshot {
				s := wiped("c-0", "c-1", "c-2")
				for i := range s.Pods {
					s.Pods[i].Obs.Keys = 3
				}
				return s
			}(), want: ActionReportDataLoss,
		},
		{name: "the annotation accepts a loss", given: func() Snapshot { s := wiped("c-0", "c-1"); s.DataLost, s.AcceptDataLoss = true, true; return s }(), want: ActionAcceptDataLoss},

		{name: "restore: traffic off the master first", given: setPod(restoring(wiped(), ""), "c-0", func(p *PodState) { p.RoleLabel = "master" }), want: ActionUnlabel, pod: "c-0"},
		{name: "restore: keys written after the loss do not stop it", given: restoring(setPod(wiped("c-2"), "c-2", func(p *PodState) { p.Obs.Keys = 5 }), ""), want: ActionNextStep},
		{name: "restore: the annotation ends a restore that cannot finish", given: func() Snapshot {
			s := restoring(wiped(), cachev1alpha1.StepRecreate)
			s.AcceptDataLoss = true
			return s
		}(), want: ActionAcceptDataLoss},
		{
			name: "restore: a pod that does not load the dump in time is named in the operation", given: func() Snapshot {
				s := restoring(wiped(), cachev1alpha1.StepRecreate)
				for i := range s.Pods {
					s.Pods[i].Created = now
				}
				s.Pods[1] = down(s.Pods[1], time.Minute)
				s.Operation.StepStartedAt = timeRef(now.Add(-2 * time.Minute))
				return s
			}(), want: ActionNextStep, pod: "c-1",
			check: func(g Gomega, a Action) {
				g.Expect(a.Operation.Reason).To(ContainSubstring("waiting for c-1 to load the dump for more than 1m0s: see kubectl logs c-1 -c restore"))
			},
		},
		{name: "restore: waits for the ConfigMap to name this recovery", given: func() Snapshot { s := restoring(wiped(), ""); s.RestoreConfig.Replace = "older"; return s }(), want: ActionWait},
		{name: "restore: waits for the init container in the template", given: func() Snapshot { s := restoring(wiped(), ""); s.StatefulSet.RestoreInit = false; return s }(), want: ActionWait},
		{
			name: "restore: then the pods are recreated", given: restoring(wiped(), ""), want: ActionNextStep,
			check: func(g Gomega, a Action) { g.Expect(a.Operation.Step).To(Equal(cachev1alpha1.StepRecreate)) },
		},
		{name: "restore: every pod made before the step is deleted", given: restoring(wiped(), cachev1alpha1.StepRecreate), want: ActionRestartPod, pod: "c-0"},
		{
			name: "restore: not in the second the step began: a replacement would look as old", given: func() Snapshot {
				s := restoring(wiped(), cachev1alpha1.StepRecreate)
				s.Operation.StepStartedAt = timeRef(now)
				return s
			}(), want: ActionWait,
		},
		{name: "restore: recreated pods are not deleted again", given: setPod(restoring(wiped(), cachev1alpha1.StepRecreate), "c-0", func(p *PodState) { p.Created = now }), want: ActionRestartPod, pod: "c-1"},
		{
			name: "restore: waits for every pod to load the dump", given: func() Snapshot {
				s := recreated(restoring(cluster(3, 0), cachev1alpha1.StepRecreate))
				s.Pods[1].Obs.Loading = true
				return s
			}(), want: ActionWait, pod: "c-1",
		},
		{name: "restore: a master started as a replica is promoted", given: setPod(recreated(restoring(cluster(3, 0), cachev1alpha1.StepRecreate)), "c-0", func(p *PodState) { p.Obs.Role = "slave" }), want: ActionPromote, pod: "c-0"},
		{name: "restore: the master is checked before it is labelled", given: recreated(restoring(cluster(3, 0), cachev1alpha1.StepRecreate)), want: ActionVerifyRestore, pod: "c-0"},
		{name: "restore: checked, the master gets traffic", given: recreated(restoring(cluster(3, 0), cachev1alpha1.StepVerified)), want: ActionLabelMaster, pod: "c-0"},
		{
			name: "restore: done when the replicas follow", given: func() Snapshot {
				s := recreated(restoring(cluster(3, 0), cachev1alpha1.StepVerified))
				s.Pods[0].RoleLabel, s.Pods[1].RoleLabel, s.Pods[2].RoleLabel = "master", "replica", "replica"
				return s
			}(), want: ActionCompleteRestore,
		},
		{
			name: "restore: a master down during the restore is no failover", given: func() Snapshot {
				s := restoring(cluster(3, 0), cachev1alpha1.StepRecreate)
				s.Pods = s.Pods[1:]
				return recreated(s)
			}(), want: ActionWait, pod: "c-0",
		},
	})
}
