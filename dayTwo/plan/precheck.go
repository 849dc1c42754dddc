package plan

import (
	"fmt"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// The pre-check tests what will run: the new template, the cluster's real
// configuration and a copy of its current data. The copy is a dump of one
// pod, taken by the backup stream into the pre-check pod's empty folder
// before its server starts (renderer.RenderPrecheck); the server must load
// it whole. A configuration that does not fit the data (databases below
// the highest database in use, a maxmemory the data exceeds) or a format
// the new version cannot read fails here, before any pod restarts.

// seedSource is the pod the pre-check copies its data from: the in-sync
// replica with the highest offset (the master is not asked to fork), the
// master when no replica is in sync. A sharded cluster's pre-check copies
// one shard (shardedSeedSource).
func seedSource(s Snapshot) (PodState, bool) {
	if s.Sharded != nil {
		return shardedSeedSource(s)
	}
	master, ok := s.Pod(s.CurrentMaster)
	if !ok {
		return PodState{}, false
	}
	if name := bestInSync(s, master, func(PodState) bool { return true }); name != "" {
		return s.Pod(name)
	}
	if inSync(master, master) && master.IP != "" {
		return master, true
	}
	return PodState{}, false
}

// judgeSeed decides a ready pre-check pod that started on a copy: pass
// when the server holds the dump's keys, fail when it does not. Keys that
// carry a TTL may expire between the dump and the load (a server that
// loads a dump as a master drops the expired ones), so the count may be
// short by at most the dump's expiring keys. decided is false while the
// count is not read yet. A pre-check without a copy passes on readiness.
func judgeSeed(s Snapshot, seed *SeedState, target *cachev1alpha1.RolloutValues) (Action, bool) {
	op := s.Operation
	pass := func(reason string) (Action, bool) {
		next := op.DeepCopy()
		next.Step, next.StepStartedAt = cachev1alpha1.StepRestart, timeRef(s.Now)
		return Action{Type: ActionPrecheckPass, Values: op.Target, Operation: next, Reason: reason}, true
	}
	if seed == nil {
		return pass("the new template starts and loads the configuration")
	}
	if seed.Loaded < 0 {
		return Action{}, false
	}
	who := engineName(*target)
	if seed.Keys < 0 {
		return pass(fmt.Sprintf("%s starts with the configuration on a copy of the data of %s and holds %d keys (the dump's key count could not be read from its header)", who, seed.Source, seed.Loaded))
	}
	if seed.Loaded > seed.Keys || seed.Loaded < seed.Keys-seed.ExpiringKeys {
		return Action{Type: ActionPrecheckFail, Reason: fmt.Sprintf("%s started on a copy of the data of %s and holds %d keys in database %d, the copy has %d (%d with a TTL)",
			who, seed.Source, seed.Loaded, seed.DB, seed.Keys, seed.ExpiringKeys)}, true
	}
	return pass(fmt.Sprintf("%s starts with the configuration on a copy of the data of %s and holds its %d keys in database %d", who, seed.Source, seed.Keys, seed.DB))
}
