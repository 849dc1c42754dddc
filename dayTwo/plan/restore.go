package plan

import (
	"fmt"
	"strings"
	"time"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// The steps of a lost dataset and its disaster recovery.

// RestorePoint is a completed backup a disaster recovery can restore.
type RestorePoint struct {
	Name string
	// Taken is when the dump was taken: what was written after it is lost.
	Taken    time.Time
	Location cachev1alpha1.BackupLocation
}

// RestoreConfig is the ConfigMap the restore init container reads, as
// last observed: its state, and the recovery that may replace data.
type RestoreConfig struct {
	State, Replace string
}

// wantPods is how many pods the cluster runs: the approved count, or what
// exists before the first approval.
func wantPods(s Snapshot) int {
	if s.Approved != nil {
		return int(s.Approved.Replicas)
	}
	return len(s.Pods)
}

// dataLoss tells whether the cluster lost its data: more than half of the
// pods came back without the data their previous run held, every pod
// answers, and none holds a key. It says what it saw, for the Event.
func dataLoss(s Snapshot) (bool, string) {
	want := wantPods(s)
	if len(s.Pods) != want {
		// A pod that is missing may come back with the data.
		return false, ""
	}
	var lost []string
	for i, p := range SortedPods(s) {
		switch {
		case p.Ordinal() != i || !Healthy(p):
			// A pod that is missing or does not answer may still hold
			// the data.
			return false, ""
		case p.Obs.LostData:
			// Keys written since the loss are not the data.
			lost = append(lost, p.Name)
		case p.Obs.Keys > 0:
			// A pod that kept its data.
			return false, ""
		}
	}
	if 2*len(lost) <= want {
		return false, ""
	}
	return true, fmt.Sprintf("%d of %d pods (%s) came back without their data and no pod kept any", len(lost), want, strings.Join(lost, ", "))
}

// planDataLoss notices a lost dataset. With spec.backup.autoRestore and a
// completed backup it starts a Restore; otherwise it reports the loss once
// (DataLost) and lets the cluster serve what it holds until a person
// decides. None when there is nothing to do about a loss.
func planDataLoss(s Snapshot) Action {
	if s.AcceptDataLoss {
		return Action{Type: ActionAcceptDataLoss, Reason: "the annotation " + cachev1alpha1.AnnotationAcceptDataLoss + " accepts the loss"}
	}
	lost, what := dataLoss(s)
	if !lost && !s.DataLost {
		return Action{Type: ActionNone}
	}
	if what == "" {
		what = "the data was lost (condition DataLost)"
	}
	if s.AutoRestore && s.LatestBackup != nil && !s.RestoreFailed {
		b := s.LatestBackup
		if op := s.Operation; op != nil && op.Type != cachev1alpha1.OperationBackup {
			// Another operation finishes first (a backup is aborted); the
			// loss is recorded now, so it is restored after it even if
			// the pods hold keys again by then.
			if s.DataLost {
				return Action{Type: ActionNone}
			}
			return Action{Type: ActionReportDataLoss, Reason: fmt.Sprintf("%s; backup %s, taken %s, is restored when the %s operation in progress ends (writes after the backup are lost)",
				what, b.Name, b.Taken.UTC().Format(time.RFC3339), op.Type)}
		}
		return Action{Type: ActionStartRestore, Reason: fmt.Sprintf("%s; restoring backup %s, taken %s: writes after it are lost", what, b.Name, b.Taken.UTC().Format(time.RFC3339)),
			Operation: &cachev1alpha1.OperationStatus{Type: cachev1alpha1.OperationRestore, Backup: b.Name, Reason: "restore backup " + b.Name + ": " + what}}
	}
	if s.DataLost {
		return Action{Type: ActionNone}
	}
	return Action{Type: ActionReportDataLoss, Reason: what + "; " + restoreAdvice(s)}
}

// restoreAdvice says how to recover when the operator does not.
func restoreAdvice(s Snapshot) string {
	accept := fmt.Sprintf("or accept the loss: kubectl annotate cachecluster %s %s=true", s.Name, cachev1alpha1.AnnotationAcceptDataLoss)
	if s.LatestBackup == nil {
		return "no completed backup of this cluster exists to restore; " + accept
	}
	b := s.LatestBackup
	return fmt.Sprintf("the latest backup is %s, taken %s: set spec.backup.autoRestore: true to restore it here (writes after it are lost), restore it into a new cluster (spec.restore.backup: %s), %s",
		b.Name, b.Taken.UTC().Format(time.RFC3339), b.Name, accept)
}

// planRestore continues a Restore operation: no traffic; the pods' init
// containers told which dump replaces their data; every pod recreated;
// the restored master checked against the backup's metadata before it is
// labelled; the replicas following it; done.
func planRestore(s Snapshot) Action {
	op := s.Operation
	if s.AcceptDataLoss {
		return Action{Type: ActionAcceptDataLoss, Reason: "the annotation " + cachev1alpha1.AnnotationAcceptDataLoss + " ends the restore"}
	}
	for _, p := range SortedPods(s) {
		if p.RoleLabel == cachev1alpha1.RoleMaster && op.Step != cachev1alpha1.StepVerified {
			return Action{Type: ActionUnlabel, Pod: p.Name, Reason: "restore: no client may write until the data is back"}
		}
	}
	if op.Step == "" {
		rc := s.RestoreConfig
		switch {
		case rc == nil || rc.Replace != op.ID || rc.State != "pending":
			return Action{Type: ActionWait, Reason: "restore: waiting for the ConfigMap " + s.Name + "-restore to name the dump"}
		case s.StatefulSet == nil || !s.StatefulSet.Settled || !s.StatefulSet.RestoreInit:
			return Action{Type: ActionWait, Reason: "restore: waiting for the StatefulSet's pods to have the restore init container"}
		}
		next := op.DeepCopy()
		next.Step, next.StepStartedAt = cachev1alpha1.StepRecreate, timeRef(s.Now)
		return Action{Type: ActionNextStep, Operation: next, Reason: "restore: recreate every pod on the dump"}
	}
	if op.Step == cachev1alpha1.StepRecreate {
		// Creation times have whole seconds: pods made in the second the
		// step began or before are recreated, from the next second on, so
		// their replacements are never taken for them.
		start := op.StepStartedAt.Time.Truncate(time.Second)
		for _, p := range SortedPods(s) {
			if !p.Deleting && !p.Created.After(start) {
				if s.Now.Before(start.Add(time.Second)) {
					return Action{Type: ActionWait, Reason: "restore: the pods are recreated from the next second on"}
				}
				return Action{Type: ActionRestartPod, Pod: p.Name, Reason: "restore: recreated on the dump"}
			}
		}
	}
	want := wantPods(s)
	var master PodState
	for i := 0; i < want; i++ {
		name := fmt.Sprintf("%s-%d", s.Name, i)
		p, ok := s.Pod(name)
		if !ok || p.Deleting || !Healthy(p) {
			why := "restore: waiting for " + name + " to load the dump"
			if op.Step == cachev1alpha1.StepRecreate && stepExpired(s) && !strings.Contains(op.Reason, why) {
				// Say so in the status: a dump gone from the bucket, wrong
				// credentials, a checksum that does not match.
				next := op.DeepCopy()
				next.Reason = fmt.Sprintf("%s; %s for more than %s: see kubectl logs %s -c restore; to start the pods on what they hold instead: kubectl annotate cachecluster %s %s=true",
					op.Reason, why, s.StepDeadline, name, s.Name, cachev1alpha1.AnnotationAcceptDataLoss)
				return Action{Type: ActionNextStep, Pod: name, Operation: next, Reason: why + " for too long"}
			}
			return Action{Type: ActionWait, Pod: name, Reason: why}
		}
		if master.Name == "" || p.Name == s.CurrentMaster {
			master = p
		}
	}
	if master.Name != s.CurrentMaster {
		return Action{Type: ActionBootstrap, Pod: master.Name, Reason: "restore: first master"}
	}
	if master.Obs.Role != "master" {
		return Action{Type: ActionPromote, Pod: master.Name, Reason: "restore: the master was started as a replica"}
	}
	if op.Step != cachev1alpha1.StepVerified {
		return Action{Type: ActionVerifyRestore, Pod: master.Name, Reason: "restore: compare the restored keys with the backup's metadata"}
	}
	if a := converge(s, master); a.Type != ActionNone {
		return a
	}
	for _, p := range s.Pods {
		if p.Name != master.Name && !inSync(p, master) {
			return Action{Type: ActionWait, Pod: p.Name, Reason: "restore: waiting for " + p.Name + " to be in sync"}
		}
	}
	return Action{Type: ActionCompleteRestore, Pod: master.Name, Reason: "restored backup " + op.Backup}
}
