package daytwo

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/access"
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// The data check after a restart (plan/datacheck.go decides when): a
// sample of the master's keys is read on the replica. Its result is kept in
// memory per cluster and pod, for the replica's run: an operator that
// restarts checks again, which costs a few milliseconds.

// dataCheckSample is how many RANDOMKEY calls a check makes on the master
// (fewer keys when some repeat or the master holds fewer).
const dataCheckSample = 32

// checkDataStep makes the data check the planner asked for and records it.
func (r *Reconciler) checkDataStep(ctx context.Context, s *scope, a plan.Action) error {
	master, _ := s.snap.Pod(a.Master)
	replica, _ := s.snap.Pod(a.Pod)
	check := checkData
	if s.cc.IsSharded() {
		check = checkShardData
	}
	dc := check(ctx, master.IP, replica.IP, s.access, dataCheckSample, 2*probeTimeout(s.cc))
	dc.RunID, dc.Master, dc.At = replica.Obs.RunID, a.Master, r.now()
	r.mu.Lock()
	if r.dataChecks == nil {
		r.dataChecks = map[types.NamespacedName]map[string]plan.DataCheck{}
	}
	if r.dataChecks[s.key] == nil {
		r.dataChecks[s.key] = map[string]plan.DataCheck{}
	}
	r.dataChecks[s.key][a.Pod] = dc
	r.mu.Unlock()
	log := ctrl.LoggerFrom(ctx)
	switch {
	case dc.Err != "":
		log.Info("Data check could not be made", "pod", a.Pod, "master", a.Master, "reason", dc.Err)
	case len(dc.Missing) > 0:
		msg := plan.DescribeMismatch(a.Pod, dc)
		log.Info("Data check failed", "pod", a.Pod, "master", a.Master, "missing", len(dc.Missing), "sampled", dc.Sampled)
		s.eventf(corev1.EventTypeWarning, cachev1alpha1.EventDataCheckFailed, "DataCheck", "%s", msg)
	default:
		log.V(1).Info("Data check passed", "pod", a.Pod, "master", a.Master, "sampled", dc.Sampled, "dropped", dc.Dropped)
		s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventDataChecked, "DataCheck",
			"%s holds the %d keys sampled on the master %s at offset %d (%d more were deleted or expired meanwhile)", a.Pod, dc.Sampled-dc.Dropped, a.Master, dc.Offset, dc.Dropped)
	}
	return nil
}

// dataChecksOf is what the checks of a cluster's pods found.
func (r *Reconciler) dataChecksOf(key types.NamespacedName) map[string]plan.DataCheck {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]plan.DataCheck, len(r.dataChecks[key]))
	for k, v := range r.dataChecks[key] {
		out[k] = v
	}
	return out
}

// checkData samples keys on the master with its offset in one MULTI,
// waits for the replica to reach that offset, and reads the keys there;
// what the replica lacks is looked up on both once more (plan/datacheck.go
// says why). Err is set when the check could not be made.
func checkData(ctx context.Context, masterIP, replicaIP string, acc access.Config, n int, wait time.Duration) plan.DataCheck {
	m, rep := redisClient(masterIP, acc), redisClient(replicaIP, acc)
	defer m.Close()
	defer rep.Close()
	return checkDataWith(ctx, m, rep, n, wait)
}

// checkShardData is checkData within a shard of a sharded cluster: the
// replica is read on READONLY connections (clusterReplicaClient).
func checkShardData(ctx context.Context, masterIP, replicaIP string, acc access.Config, n int, wait time.Duration) plan.DataCheck {
	m, rep := redisClient(masterIP, acc), clusterReplicaClient(replicaIP, acc)
	defer m.Close()
	defer rep.Close()
	return checkDataWith(ctx, m, rep, n, wait)
}

// checkDataWith is checkData on the master's and the replica's clients.
func checkDataWith(ctx context.Context, m, rep *redis.Client, n int, wait time.Duration) plan.DataCheck {
	dc := plan.DataCheck{}
	fail := func(format string, a ...any) plan.DataCheck { dc.Err = fmt.Sprintf(format, a...); return dc }

	var cmds []redis.Cmder
	cmds, err := m.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for range n {
			p.RandomKey(ctx)
		}
		p.Info(ctx, "replication")
		return nil
	})
	if err != nil && err != redis.Nil {
		return fail("sampling keys on the master: %v", err)
	}
	if len(cmds) != n+1 {
		return fail("sampling keys on the master: %d replies to %d commands", len(cmds), n+1)
	}
	var keys []string
	for _, c := range cmds[:n] {
		if k, err := c.(*redis.StringCmd).Result(); err == nil && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	offset, err := masterOffset(cmds[n].(*redis.StringCmd).Val())
	if err != nil {
		return fail("%v", err)
	}
	dc.Sampled, dc.Offset = len(keys), offset
	if len(keys) == 0 {
		return dc
	}
	missing, err := lacking(ctx, rep, keys, offset, wait)
	if err != nil {
		return fail("%v", err)
	}
	if len(missing) == 0 {
		return dc
	}
	// Second look: which of them the master still holds, at which offset.
	var exists []*redis.IntCmd
	var info *redis.StringCmd
	if _, err := m.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range missing {
			exists = append(exists, p.Exists(ctx, k))
		}
		info = p.Info(ctx, "replication")
		return nil
	}); err != nil {
		return fail("looking the keys up on the master again: %v", err)
	}
	var held []string
	for i, k := range missing {
		if exists[i].Val() == 1 {
			held = append(held, k)
		} else {
			dc.Dropped++
		}
	}
	if offset, err = masterOffset(info.Val()); err != nil {
		return fail("%v", err)
	}
	if len(held) == 0 {
		return dc
	}
	if dc.Missing, err = lacking(ctx, rep, held, offset, wait); err != nil {
		return fail("%v", err)
	}
	dc.Offset = offset
	return dc
}

// lacking waits until the replica reached offset, then returns the keys it
// does not hold.
func lacking(ctx context.Context, rep *redis.Client, keys []string, offset int64, wait time.Duration) ([]string, error) {
	end := time.Now().Add(wait)
	for {
		info, err := rep.Info(ctx, "replication").Result()
		if err != nil {
			return nil, fmt.Errorf("the replica's offset: %w", err)
		}
		at := probe.ParseInfo(info).Offset
		if at >= offset {
			break
		}
		if time.Now().After(end) {
			return nil, fmt.Errorf("the replica did not reach the master's offset %d within %s (it is at %d)", offset, wait, at)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	cmds, err := rep.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Exists(ctx, k)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the keys on the replica: %w", err)
	}
	var missing []string
	for i, c := range cmds {
		if c.(*redis.IntCmd).Val() == 0 {
			missing = append(missing, keys[i])
		}
	}
	return missing, nil
}

// masterOffset is the replication offset in a master's INFO; a pod that
// is no master any more (it failed over meanwhile) has none to compare.
func masterOffset(info string) (int64, error) {
	o := probe.ParseInfo(info)
	if o.Role != "master" {
		return 0, fmt.Errorf("the master is %q now, not master", o.Role)
	}
	return o.Offset, nil
}
