// Package daytwo is the day-two controller of cacheops for replication
// mode. One reconcile observes (observe.go: the pods, what the prober last
// saw of their Redis, the StatefulSet, backups and restore state), asks the
// planner for the next step (dayTwo/plan), takes exactly that one step
// (execute.go: one executor per action, in topology.go, operations.go,
// reconfigure.go, precheck.go, restore.go and backup_attempt.go) and
// writes what changed in the status once (scope.go). An operation is
// recorded in the status before its first step, so an operator restarted
// mid-failover finishes the same failover.
//
// It must not decide: every choice is the planner's, and what the executor
// needs to look at again before it acts is a step the planner plans
// (Refresh). It must not act twice on a stale cache: after a write it
// waits until the cache shows it (expectations.go). It never writes a
// CacheCluster's spec and never renders objects: that is the day-one
// controller's job (renderer/controller); even the upgrade pre-check's pod
// and ConfigMap come from the renderer (renderer.RenderPrecheck), and
// day-two only applies them.
package daytwo
