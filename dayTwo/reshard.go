package daytwo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// The steps of resharding (plan/reshard.go orders them): a batch of slots
// is marked importing on its new owner and migrating on its old one, its
// keys move with MIGRATE, then every master is told the new owner; a
// removed shard's nodes are forgotten before its pods go.

// migrateBudget bounds the time one MigrateKeys step moves keys: a
// reconcile never blocks for long, the next one continues.
const migrateBudget = 2 * time.Second

// migrateTimeout is MIGRATE's own timeout (milliseconds) for one batch.
const migrateTimeout = 5000

// nodeOf is the node ID and address of a pod's Redis as its probe saw it.
func nodeOf(s *scope, pod string) (ip, id string, err error) {
	p, ok := s.snap.Pod(pod)
	if !ok || p.IP == "" || p.Obs.Cluster == nil {
		return "", "", fmt.Errorf("the node of %s is not known", pod)
	}
	return p.IP, p.Obs.Cluster.Myself.ID, nil
}

// setSlots sends CLUSTER SETSLOT slot <how> [id] for every slot of slots
// in one pipeline.
func setSlots(ctx context.Context, ip, password string, slots []probe.SlotRange, how, id string) error {
	c := redisClient(ip, password)
	defer c.Close()
	var cmds []*redis.Cmd
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, r := range slots {
			for slot := r.Start; slot <= r.End; slot++ {
				cmds = append(cmds, p.Do(ctx, "CLUSTER", "SETSLOT", slot, how, id))
			}
		}
		return nil
	}); err != nil {
		for _, cmd := range cmds {
			if cmd.Err() != nil {
				return fmt.Errorf("CLUSTER SETSLOT %v %s on %s: %w", cmd.Args()[2], how, ip, cmd.Err())
			}
		}
		return err
	}
	return nil
}

// slotsMigrating marks a.Slots importing on a.Master's node (from
// a.Pod's), then migrating on a.Pod's (to a.Master's): the target first,
// so a client the source sends there (ASK) is served.
func (r *Reconciler) slotsMigrating(ctx context.Context, s *scope, a plan.Action) error {
	sip, sid, err := nodeOf(s, a.Pod)
	if err != nil {
		return err
	}
	tip, tid, err := nodeOf(s, a.Master)
	if err != nil {
		return err
	}
	if err := setSlots(ctx, tip, s.password, a.Slots, "IMPORTING", sid); err != nil {
		return err
	}
	if err := setSlots(ctx, sip, s.password, a.Slots, "MIGRATING", tid); err != nil {
		return err
	}
	s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventSlotsMoving, "Resharding", "Moving slots %v from %s to %s", plan.SlotStrings(a.Slots), a.Pod, a.Master)
	return nil
}

// migrateRoundSlots is how many slots one round of migrateKeys reads the
// keys of (one pipeline of GETKEYSINSLOT) and migrates (one pipeline of
// MIGRATE and WAIT pairs): at most migrateRoundSlots × MigrateBatchKeys
// keys a round.
const migrateRoundSlots = 16

// migrateKeys moves the keys of a.Slots from a.Pod's node to a.Master's
// (GETKEYSINSLOT, MIGRATE … KEYS), MigrateBatchKeys per MIGRATE, for at
// most migrateBudget; the planner sees from COUNTKEYSINSLOT what is left.
// It works in rounds of migrateRoundSlots slots, two pipelines each: the
// keys of every slot of the round, then a MIGRATE of each slot's keys,
// each followed by WAIT. Redis runs a client's pipelined commands one
// after the other and a WAIT blocks the client, so every MIGRATE still
// starts only once the source's replica has the one before: a pipeline
// saves the round trips, not the wait. A slot that gave fewer keys than
// asked is empty after its MIGRATE (a slot marked migrating creates no
// key on the source: a client is sent to the target with ASK), so it is
// not asked again; one that gave MigrateBatchKeys is in the next round.
func (r *Reconciler) migrateKeys(ctx context.Context, s *scope, a plan.Action) error {
	from, to := a.Pod, a.Master
	sip, _, err := nodeOf(s, from)
	if err != nil {
		return err
	}
	tip, _, err := nodeOf(s, to)
	if err != nil {
		return err
	}
	// A round's replies are read at once: each MIGRATE answers once the
	// target stored its keys, within MIGRATE's own timeout, and each
	// WAIT within its own.
	c := redisClientReading(sip, s.password, migrateRoundSlots*(migrateTimeout+migrateWait)*time.Millisecond+2*time.Second)
	defer c.Close()
	replicas := s.snap.Sharded.PodsPerShard - 1
	start, moved := time.Now(), 0
	defer func() {
		took := time.Since(start)
		s.then(func() {
			ctrl.LoggerFrom(ctx).Info("Keys migrated", "from", from, "to", to, "keys", moved, "duration", took.Round(time.Millisecond).String())
		})
	}()
	var pending []int
	for _, sr := range a.Slots {
		for slot := sr.Start; slot <= sr.End; slot++ {
			pending = append(pending, slot)
		}
	}
	for len(pending) > 0 {
		if time.Since(start) > migrateBudget {
			return nil
		}
		round := pending[:min(len(pending), migrateRoundSlots)]
		keys, err := keysInSlots(ctx, c, round)
		if err != nil {
			return fmt.Errorf("CLUSTER GETKEYSINSLOT on %s: %w", from, err)
		}
		var again []int
		cmds := make([]*redis.Cmd, len(round))
		_, perr := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, slot := range round {
				if len(keys[i]) == 0 {
					continue
				}
				args := []any{"MIGRATE", tip, "6379", "", 0, migrateTimeout}
				if s.password != "" {
					args = append(args, "AUTH", s.password)
				}
				args = append(args, "KEYS")
				for _, k := range keys[i] {
					args = append(args, k)
				}
				cmds[i] = p.Do(ctx, args...)
				// The source's replicas drop the moved keys before the
				// next MIGRATE: a replica promoted after a crash of the
				// source holds as few keys the target also holds as can
				// be. A shard without replicas has none to wait for
				// (WAIT would sit out its whole timeout).
				if replicas > 0 {
					p.Do(ctx, "WAIT", 1, migrateWait)
				}
				if len(keys[i]) == plan.MigrateBatchKeys {
					again = append(again, slot)
				}
			}
			return nil
		})
		// A pipeline is no transaction: a MIGRATE that failed (BUSYKEY)
		// does not stop the next ones, each of which moves its keys or
		// none of them.
		for i, cmd := range cmds {
			if cmd == nil {
				continue
			}
			if err := cmd.Err(); err != nil && err != redis.Nil {
				return fmt.Errorf("MIGRATE %d keys of slot %d from %s to %s: %w", len(keys[i]), round[i], from, to, err)
			}
			moved += len(keys[i])
		}
		if perr != nil && perr != redis.Nil {
			return fmt.Errorf("MIGRATE from %s to %s: %w", from, to, perr)
		}
		pending = append(again, pending[len(round):]...)
	}
	return nil
}

// migrateWait is the WAIT timeout after each MIGRATE, in milliseconds.
const migrateWait = 500

// keysInSlots is CLUSTER GETKEYSINSLOT slot MigrateBatchKeys of every
// slot, in one pipeline.
func keysInSlots(ctx context.Context, c *redis.Client, slots []int) ([][]string, error) {
	cmds := make([]*redis.StringSliceCmd, len(slots))
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, slot := range slots {
			cmds[i] = p.ClusterGetKeysInSlot(ctx, slot, plan.MigrateBatchKeys)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([][]string, len(slots))
	for i, cmd := range cmds {
		out[i] = cmd.Val()
	}
	return out, nil
}

// slotsReimport tells a.Master's node, which imports a.Slots, that
// a.Pod's serves them (SETSLOT NODE keeps the import), then marks them
// again as slotsMigrating does.
func (r *Reconciler) slotsReimport(ctx context.Context, s *scope, a plan.Action) error {
	_, sid, err := nodeOf(s, a.Pod)
	if err != nil {
		return err
	}
	tip, _, err := nodeOf(s, a.Master)
	if err != nil {
		return err
	}
	if err := setSlots(ctx, tip, s.password, a.Slots, "NODE", sid); err != nil {
		return err
	}
	return r.slotsMigrating(ctx, s, a)
}

// slotsAssign gives a.Slots to a.Master's node on it, then on a.Pod's
// (the source, which refuses while it holds a key of one), then on every
// other master in a.Pods.
func (r *Reconciler) slotsAssign(ctx context.Context, s *scope, a plan.Action) error {
	tip, tid, err := nodeOf(s, a.Master)
	if err != nil {
		return err
	}
	order := []string{a.Master}
	if a.Pod != a.Master {
		order = append(order, a.Pod)
	}
	order = append(order, a.Pods...)
	for i, pod := range order {
		ip := tip
		if i > 0 {
			if ip, _, err = nodeOf(s, pod); err != nil {
				return err
			}
		}
		if err := setSlots(ctx, ip, s.password, a.Slots, "NODE", tid); err != nil {
			if i > 0 && isReplicaNow(err) {
				// A source that gave away its last slot follows the
				// new owner (Redis 7 does that): a replica keeps no
				// slot state, it learns the owner from gossip.
				continue
			}
			return err
		}
	}
	return nil
}

func isReplicaNow(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Please use SETSLOT only with masters")
}

// clusterForget has a.Pod's node forget a.NodeIDs; a node it does not
// know any more is forgotten already.
func (r *Reconciler) clusterForget(ctx context.Context, s *scope, a plan.Action) error {
	ip, _, err := nodeOf(s, a.Pod)
	if err != nil {
		return err
	}
	c := redisClient(ip, s.password)
	defer c.Close()
	for _, id := range a.NodeIDs {
		if err := c.ClusterForget(ctx, id).Err(); err != nil && !isUnknownNode(err) {
			return fmt.Errorf("CLUSTER FORGET %s on %s: %w", id, a.Pod, err)
		}
	}
	return nil
}

// clusterReset has a removed pod's node forget the cluster: CLUSTER RESET
// HARD (Redis refuses it on a master that holds keys).
func (r *Reconciler) clusterReset(ctx context.Context, s *scope, a plan.Action) error {
	ip, _, err := nodeOf(s, a.Pod)
	if err != nil {
		return err
	}
	c := redisClient(ip, s.password)
	defer c.Close()
	return c.ClusterResetHard(ctx).Err()
}

func isUnknownNode(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "ERR Unknown node")
}

// resizeShards approves the pod count of a shard-count change.
func (r *Reconciler) resizeShards(_ context.Context, s *scope, a plan.Action) error {
	before := s.snap.Approved.Replicas
	s.status.set(func(st *cachev1alpha1.CacheClusterStatus) { approveValues(st, *a.Values) })
	pps := int32(s.snap.Sharded.PodsPerShard)
	if a.Values.Replicas > before {
		s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventShardAdded, "Resharding", "Adding the pods of shards %d to %d (%s)", before/pps, a.Values.Replicas/pps-1, podRange(s.cc.Name, before, a.Values.Replicas))
	} else {
		s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventShardRemoved, "Resharding", "Shards %d to %d own no slot and no key and no node knows them; removing %s", a.Values.Replicas/pps, before/pps-1, podRange(s.cc.Name, a.Values.Replicas, before))
	}
	return nil
}

func podRange(name string, from, to int32) string {
	if to-from == 1 {
		return name + "-" + strconv.Itoa(int(from))
	}
	return fmt.Sprintf("%s-%d to %s-%d", name, from, name, to-1)
}
