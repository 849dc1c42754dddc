package plan

import (
	"strings"
	"time"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// ActionType names the one step the executor takes next.
type ActionType string

// The steps of day-two replication management. Each is idempotent: doing it
// twice leaves the same state.
const (
	// ActionNone: the topology is as it should be.
	ActionNone ActionType = "None"
	// ActionWait: something must happen first (a pod to answer, a timeout
	// to pass); Reason says what.
	ActionWait ActionType = "Wait"
	// ActionBootstrap records the first master in the status.
	ActionBootstrap ActionType = "Bootstrap"
	// ActionStartFailover records the failover (from, to) in the status
	// before any step of it is taken.
	ActionStartFailover ActionType = "StartFailover"
	// ActionUnlabel takes the master label off a pod so the Service stops
	// sending it traffic.
	ActionUnlabel ActionType = "Unlabel"
	// ActionPromote makes a pod master (REPLICAOF NO ONE).
	ActionPromote ActionType = "Promote"
	// ActionLabelMaster labels the master so the Service selects it.
	ActionLabelMaster ActionType = "LabelMaster"
	// ActionLabelReplica labels a replica.
	ActionLabelReplica ActionType = "LabelReplica"
	// ActionRepoint makes a replica follow the master (REPLICAOF master).
	ActionRepoint ActionType = "Repoint"
	// ActionFence makes a pod that believes it is master a replica of the
	// real master, before it gets any traffic.
	ActionFence ActionType = "Fence"
	// ActionCompleteFailover records the new master and ends the operation.
	ActionCompleteFailover ActionType = "CompleteFailover"
	// ActionRefresh probes Pods again now: the next decision needs what
	// they answer after a moment the snapshot's observations predate.
	ActionRefresh ActionType = "Refresh"
	// ActionLastLook starts, in the background, one probe of the master
	// Pod that waits the whole probe timeout, before a failover: a
	// master that answers it is slow, not down (planMasterDown).
	ActionLastLook ActionType = "LastLook"
	// ActionRecreate deletes a pod that stayed not-Ready too long; its
	// StatefulSet makes a new one on the same volume (and so in the same
	// zone, which the volume's node affinity enforces).
	ActionRecreate ActionType = "Recreate"
)

// Action is the planner's decision.
type Action struct {
	Type ActionType
	// Pod the action is about.
	Pod string
	// Master is the pod Pod must follow (Repoint, Fence) or the failed
	// master (StartFailover).
	Master string
	Reason string
	// Values are what Approve, StartOperation and Rollback approve.
	Values *cachev1alpha1.RolloutValues
	// Operation is what StartOperation records, or the operation's next
	// state (NextStep, CompleteOperation).
	Operation *cachev1alpha1.OperationStatus
	// Config holds the parameters ApplyConfig sets live.
	Config map[string]string
	// Pods are the pods Refresh probes.
	Pods []string
	// Alert, on a Wait that only a person can end, is the reason of the
	// Warning Event that says so.
	Alert string
	// MasterSlow, on a LastLook at a master its replicas still hear from
	// (heardByReplicas): Reason goes out in a MasterSlow Event too, as it
	// is not failed over yet.
	MasterSlow bool
	// OnAnswer, on a Wait: what ends it is something the controller is
	// woken for — a pod's answer the prober reports (a pod answers or
	// stops answering, changes role, link or loading state), a watched
	// object, a person's change — and neither an offset nor the clock,
	// so the cluster need not be planned again every probe period.
	// Until, when set, is when the wait may end by itself (a master that
	// does not answer that long is down): plan again then.
	OnAnswer bool
	Until    time.Time
	// Slots are the slots ClusterAddSlots assigns.
	Slots []probe.SlotRange
	// Shards are what RecordShards writes to status.shards.
	Shards []cachev1alpha1.ShardStatus
	// NodeIDs are the nodes ClusterForget forgets.
	NodeIDs []string
	// Sources are the shards' sources of RunShardedBackup.
	Sources []BackupSource
}

func (a Action) String() string {
	s := string(a.Type)
	if a.Pod != "" {
		s += " " + a.Pod
	}
	if len(a.Pods) > 0 {
		s += " " + strings.Join(a.Pods, ",")
	}
	if a.Master != "" {
		s += " (master " + a.Master + ")"
	}
	if a.Reason != "" {
		s += ": " + a.Reason
	}
	return s
}

// Operations (operations.go): scaling, upgrades, configuration changes, switchovers.
const (
	// ActionApprove writes Values to status.rollout: day-one renders the
	// StatefulSet and the ConfigMap from them.
	ActionApprove ActionType = "Approve"
	// ActionStartOperation records Operation in the status before any of
	// its steps is taken.
	ActionStartOperation ActionType = "StartOperation"
	// ActionNextStep records the operation's next step.
	ActionNextStep ActionType = "NextStep"
	// ActionCompleteOperation ends the operation: Values (if set) are
	// approved and Operation (if set) holds the rollout's verdict.
	ActionCompleteOperation ActionType = "CompleteOperation"
	// ActionPrecheckStart starts a temporary pod with the new template.
	ActionPrecheckStart ActionType = "PrecheckStart"
	// ActionPrecheckPass removes the pre-check pod and approves the new
	// template; the restarts begin.
	ActionPrecheckPass ActionType = "PrecheckPass"
	// ActionPrecheckFail removes the pre-check pod and blocks the new
	// template; no pod of the cluster was touched.
	ActionPrecheckFail ActionType = "PrecheckFail"
	// ActionRefuseChange refuses the change of spec in Values without
	// starting anything (a downgrade to an RDB format older than the
	// master's); Reason says why and what to do.
	ActionRefuseChange ActionType = "RefuseChange"
	// ActionRestartPod deletes a pod so its StatefulSet recreates it on
	// the approved template.
	ActionRestartPod ActionType = "RestartPod"
	// ActionRollback approves the previous values again and restarts the
	// pods that run the new template.
	ActionRollback ActionType = "Rollback"
	// ActionGracefulSwitchover runs Redis FAILOVER TO on the master: it
	// pauses writes, waits for the target to catch up, then swaps roles.
	ActionGracefulSwitchover ActionType = "GracefulSwitchover"
	// ActionEndSwitchover records the new master (or the abort) and returns
	// to the operation's next step.
	ActionEndSwitchover ActionType = "EndSwitchover"
	// ActionApplyConfig sets parameters live with CONFIG SET on every pod
	// and checks them with CONFIG GET.
	ActionApplyConfig ActionType = "ApplyConfig"
	// ActionClearSwitchoverRequest removes the switchover annotation.
	ActionClearSwitchoverRequest ActionType = "ClearSwitchoverRequest"
)

// Data loss and disaster recovery (restore.go).
const (
	// ActionReportDataLoss sets the DataLost condition: the cluster is
	// Failed, and the message says how to restore.
	ActionReportDataLoss ActionType = "ReportDataLoss"
	// ActionAcceptDataLoss ends a reported loss without a restore, as the
	// annotation asks, and removes the annotation.
	ActionAcceptDataLoss ActionType = "AcceptDataLoss"
	// ActionStartRestore records a Restore operation and the backup it
	// restores (status.restoreFrom) before any of its steps.
	ActionStartRestore ActionType = "StartRestore"
	// ActionCompleteRestore ends the Restore operation: DataLost False, or
	// True (RestoreFailed) when the restored master failed its check.
	ActionCompleteRestore ActionType = "CompleteRestore"
)

// Backups (backup.go) and the check of a restore.
const (
	// ActionRunBackup starts streaming a dump of Pod to the backup target.
	ActionRunBackup ActionType = "RunBackup"
	// ActionCheckData reads a sample of Master's keys on the replica Pod,
	// once the replica has reached the master's offset at sample time,
	// and records what it found (Snapshot.DataChecks).
	ActionCheckData ActionType = "CheckData"
	// ActionVerifyRestore compares the restored master's keys with the
	// backup's metadata and records the Restored condition.
	ActionVerifyRestore ActionType = "VerifyRestore"
)

// TLS (tls.go).
const (
	// ActionReloadTLS looks at the certificate Pod's server presents and,
	// when it is not the Secret's, makes the server read its certificate
	// files again (CONFIG SET tls-cert-file), then records what it serves
	// (Snapshot.TLS.Served).
	ActionReloadTLS ActionType = "ReloadTLS"
)
