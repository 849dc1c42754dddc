package daytwo

import (
	"context"
	"fmt"

	"github.com/cacheops/cacheops/dayTwo/plan"
)

// executor takes one planned step. It never decides: what it must check
// before it acts is a step the planner planned first (plan.ActionRefresh),
// and every choice it applies is in the action.
type executor func(ctx context.Context, s *scope, a plan.Action) error

// executors are the day-two steps by action, one file per concern:
// topology.go (bootstrap, failover, fencing, labels), operations.go
// (scaling, upgrades, switchovers), reconfigure.go, precheck.go,
// restore.go and backups.go.
func (r *Reconciler) executors() map[plan.ActionType]executor {
	return map[plan.ActionType]executor{
		plan.ActionBootstrap:        r.bootstrap,
		plan.ActionRefresh:          r.refresh,
		plan.ActionStartFailover:    r.startFailover,
		plan.ActionUnlabel:          r.unlabel,
		plan.ActionLabelMaster:      r.labelMaster,
		plan.ActionLabelReplica:     r.labelReplica,
		plan.ActionPromote:          r.promote,
		plan.ActionRepoint:          r.repoint,
		plan.ActionFence:            r.fence,
		plan.ActionRecreate:         r.recreate,
		plan.ActionCompleteFailover: r.completeFailover,

		plan.ActionApprove:                r.approve,
		plan.ActionStartOperation:         r.startOperation,
		plan.ActionNextStep:               r.nextStep,
		plan.ActionCompleteOperation:      r.completeOperation,
		plan.ActionRestartPod:             r.restartPod,
		plan.ActionRollback:               r.rollback,
		plan.ActionGracefulSwitchover:     r.gracefulSwitchover,
		plan.ActionEndSwitchover:          r.endSwitchover,
		plan.ActionClearSwitchoverRequest: r.clearSwitchoverRequest,
		plan.ActionApplyConfig:            r.applyConfigStep,
		plan.ActionPrecheckStart:          r.precheckStart,
		plan.ActionPrecheckPass:           r.precheckPass,
		plan.ActionPrecheckFail:           r.precheckFail,

		plan.ActionRunBackup:       r.runBackup,
		plan.ActionReportDataLoss:  r.reportDataLoss,
		plan.ActionAcceptDataLoss:  r.acceptDataLoss,
		plan.ActionStartRestore:    r.startRestore,
		plan.ActionVerifyRestore:   r.verifyRestoreStep,
		plan.ActionCompleteRestore: r.completeRestore,
	}
}

// execute takes the step a names.
func (r *Reconciler) execute(ctx context.Context, s *scope, a plan.Action) error {
	run, ok := r.executors()[a.Type]
	if !ok {
		return fmt.Errorf("unknown action %s", a.Type)
	}
	return run(ctx, s, a)
}
