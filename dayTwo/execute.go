package daytwo

import (
	"context"
	"fmt"

	"github.com/cacheops/cacheops/dayTwo/plan"
)

// executors are the day-two steps by action, built once. An executor
// never decides: what it must check before it acts is a step the planner
// planned first (plan.ActionRefresh), and every choice it applies is in
// the action. They are, one file per concern:
// topology.go (bootstrap, failover, fencing, labels), operations.go
// (scaling, upgrades, switchovers), reconfigure.go, precheck.go,
// restore.go, backups.go, cluster_bootstrap.go, reshard.go and
// shard_rollout.go (sharded clusters), tls.go (loading a renewed
// certificate).
var executors = map[plan.ActionType]func(*Reconciler, context.Context, *scope, plan.Action) error{
	plan.ActionBootstrap:        (*Reconciler).bootstrap,
	plan.ActionRefresh:          (*Reconciler).refresh,
	plan.ActionLastLook:         (*Reconciler).lastLook,
	plan.ActionStartFailover:    (*Reconciler).startFailover,
	plan.ActionUnlabel:          (*Reconciler).unlabel,
	plan.ActionLabelMaster:      (*Reconciler).labelMaster,
	plan.ActionLabelReplica:     (*Reconciler).labelReplica,
	plan.ActionPromote:          (*Reconciler).promote,
	plan.ActionRepoint:          (*Reconciler).repoint,
	plan.ActionFence:            (*Reconciler).fence,
	plan.ActionRecreate:         (*Reconciler).recreate,
	plan.ActionCompleteFailover: (*Reconciler).completeFailover,

	plan.ActionApprove:                (*Reconciler).approve,
	plan.ActionStartOperation:         (*Reconciler).startOperation,
	plan.ActionNextStep:               (*Reconciler).nextStep,
	plan.ActionCompleteOperation:      (*Reconciler).completeOperation,
	plan.ActionRestartPod:             (*Reconciler).restartPod,
	plan.ActionRollback:               (*Reconciler).rollback,
	plan.ActionGracefulSwitchover:     (*Reconciler).gracefulSwitchover,
	plan.ActionEndSwitchover:          (*Reconciler).endSwitchover,
	plan.ActionClearSwitchoverRequest: (*Reconciler).clearSwitchoverRequest,
	plan.ActionApplyConfig:            (*Reconciler).applyConfigStep,
	plan.ActionPrecheckStart:          (*Reconciler).precheckStart,
	plan.ActionPrecheckPass:           (*Reconciler).precheckPass,
	plan.ActionPrecheckFail:           (*Reconciler).precheckFail,
	plan.ActionRefuseChange:           (*Reconciler).refuseChange,
	plan.ActionCheckData:              (*Reconciler).checkDataStep,

	plan.ActionRunBackup:        (*Reconciler).runBackup,
	plan.ActionRunShardedBackup: (*Reconciler).runShardedBackup,
	plan.ActionRefuseRestore:    (*Reconciler).refuseRestore,
	plan.ActionReportDataLoss:   (*Reconciler).reportDataLoss,
	plan.ActionAcceptDataLoss:   (*Reconciler).acceptDataLoss,
	plan.ActionStartRestore:     (*Reconciler).startRestore,
	plan.ActionVerifyRestore:    (*Reconciler).verifyRestoreStep,
	plan.ActionCompleteRestore:  (*Reconciler).completeRestore,

	plan.ActionClusterMeet:      (*Reconciler).clusterMeet,
	plan.ActionClusterAddSlots:  (*Reconciler).clusterAddSlots,
	plan.ActionClusterReplicate: (*Reconciler).clusterReplicate,
	plan.ActionRecordShards:     (*Reconciler).recordShards,

	plan.ActionSlotsMigrating: (*Reconciler).slotsMigrating,
	plan.ActionMigrateKeys:    (*Reconciler).migrateKeys,
	plan.ActionSlotsAssign:    (*Reconciler).slotsAssign,
	plan.ActionSlotsReimport:  (*Reconciler).slotsReimport,
	plan.ActionClusterForget:  (*Reconciler).clusterForget,
	plan.ActionClusterReset:   (*Reconciler).clusterReset,
	plan.ActionResizeShards:   (*Reconciler).resizeShards,

	plan.ActionShardFailover:      (*Reconciler).shardFailover,
	plan.ActionEndShardSwitchover: (*Reconciler).endShardSwitchover,

	plan.ActionReloadTLS: (*Reconciler).reloadTLS,
}

// execute takes the step a names.
func (r *Reconciler) execute(ctx context.Context, s *scope, a plan.Action) error {
	run, ok := executors[a.Type]
	if !ok {
		return fmt.Errorf("unknown action %s", a.Type)
	}
	return run(r, ctx, s, a)
}
