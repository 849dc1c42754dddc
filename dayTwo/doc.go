// Package daytwo is the day-two controller of cacheops for replication mode:
// it probes every pod's Redis (INFO replication), plans the next step with a
// pure function of what it observed (Plan), and takes one idempotent step per
// reconcile — bootstrap, failover, promote, repoint, fence, relabel —
// recording an operation in the status before its first step, so an
// operator restarted mid-failover finishes the same failover.
//
// It never writes a CacheCluster's spec and never renders objects: that is
// the day-one controller's job (renderer/controller). Even the upgrade
// pre-check's pod and ConfigMap come from the renderer
// (renderer.RenderPrecheck); day-two only applies them.
package daytwo
