package plan

import (
	"testing"

	. "github.com/onsi/gomega"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// formedCluster is a formed, approved sharded cluster of shards ×
// perShard pods and its snapshot.
func formedCluster(t *testing.T, shards, perShard int) (*redisCluster, Snapshot) {
	c := newRedisCluster(shards, perShard)
	steps, s := c.run(t, c.snapshot())
	if last := steps[len(steps)-1]; last.Type != ActionNone {
		t.Fatalf("the cluster did not form: %s", last)
	}
	return c, s
}

// takingBackup is s with a Backup operation of the CacheBackup b.
func takingBackup(s Snapshot, b BackupState) Snapshot {
	s.Operation = &cachev1alpha1.OperationStatus{ID: "op1", Type: cachev1alpha1.OperationBackup, Backup: b.Name}
	s.Backup = &b
	return s
}

// fresh is the snapshot the nodes give now, with s's status.
func (c *redisCluster) fresh(s Snapshot) Snapshot {
	f := c.snapshot()
	f.Sharded.Recorded, f.Approved, f.Spec, f.Operation = s.Sharded.Recorded, s.Approved, s.Spec, s.Operation
	f.RestorePending, f.Sharded.Restore, f.Backup, f.PendingBackup = s.RestorePending, s.Sharded.Restore, s.Backup, s.PendingBackup
	return f
}

// until plays the planner's steps on the model until one of the given
// type, and returns it with the snapshot it was planned on.
func (c *redisCluster) until(t *testing.T, s Snapshot, types ...ActionType) (Action, Snapshot) {
	t.Helper()
	for range 200 {
		f := c.fresh(s)
		a := Next(f)
		for _, typ := range types {
			if a.Type == typ {
				return a, f
			}
		}
		if a.Type == ActionNone || a.Type == ActionWait {
			t.Fatalf("no %v step: %s", types, a)
		}
		c.apply(t, &f, a)
		s = f
	}
	t.Fatalf("no %v step in 200", types)
	return Action{}, s
}

func sources(a Action) map[int]string {
	out := map[int]string{}
	for _, src := range a.Sources {
		out[src.Shard] = src.Pod
	}
	return out
}

// Each shard's dump comes from an in-sync, idle replica of that shard's
// master, by the rules of a replication cluster's backup; the master only
// when it is its shard's only pod; a shard without one holds the backup.
func TestShardedBackupSources(t *testing.T) {
	pending := BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupPending}
	tests := []struct {
		name      string
		shards    int
		perShard  int
		given     func(c *redisCluster, s Snapshot) Snapshot
		want      map[int]string
		wantWait  string
		wantWhyOf map[int]string
	}{
		{
			name: "one replica per shard", shards: 3, perShard: 2,
			want: map[int]string{0: "c-1", 1: "c-3", 2: "c-5"},
		},
		{
			name: "no replicas: each shard's master", shards: 3, perShard: 1,
			want:      map[int]string{0: "c-0", 1: "c-1", 2: "c-2"},
			wantWhyOf: map[int]string{1: "the only pod of shard 1"},
		},
		{
			name: "a replica busy with a background save is passed over", shards: 3, perShard: 3,
			given: func(c *redisCluster, s Snapshot) Snapshot {
				c.byName("c-4").saving = true
				return s
			},
			want:      map[int]string{0: "c-1", 1: "c-5", 2: "c-7"},
			wantWhyOf: map[int]string{1: "in sync and idle (c-4 is busy with a background save)"},
		},
		{
			name: "a replica an earlier attempt stalled on is passed over", shards: 3, perShard: 3,
			given: func(c *redisCluster, s Snapshot) Snapshot {
				b := *s.Backup
				b.Stalled = []string{"c-1"}
				s.Backup = &b
				return s
			},
			want: map[int]string{0: "c-2", 1: "c-4", 2: "c-7"},
		},
		{
			name: "after a failover the old master, now the replica, is the source", shards: 3, perShard: 2,
			given: func(c *redisCluster, s Snapshot) Snapshot {
				old, promoted := c.byName("c-2"), c.byName("c-3")
				promoted.master, promoted.masterID, promoted.slots = true, "", old.slots
				old.master, old.masterID, old.slots = false, promoted.id, nil
				return s
			},
			want: map[int]string{0: "c-1", 1: "c-2", 2: "c-5"},
		},
		{
			name: "a shard whose replica is down waits, as a replication cluster does", shards: 3, perShard: 2,
			given: func(c *redisCluster, s Snapshot) Snapshot {
				c.byName("c-3").down = true
				return s
			},
			wantWait: "backup b waits: shard 1 has no replica of c-2 that is ready and in sync",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c, s := formedCluster(t, tt.shards, tt.perShard)
			s = takingBackup(s, pending)
			if tt.given != nil {
				s = tt.given(c, s)
			}
			a, _ := c.until(t, s, ActionRunShardedBackup, ActionWait)
			if tt.wantWait != "" {
				g.Expect(a.Type).To(Equal(ActionWait), "%s", a)
				g.Expect(a.Reason).To(Equal(tt.wantWait))
				return
			}
			g.Expect(a.Type).To(Equal(ActionRunShardedBackup), "%s", a)
			g.Expect(sources(a)).To(Equal(tt.want))
			for i, src := range a.Sources {
				g.Expect(src.Shard).To(Equal(i), "the sources are in shard order")
				if why, ok := tt.wantWhyOf[i]; ok {
					g.Expect(src.Why).To(Equal(why))
				}
			}
		})
	}
}

// The backup records the slots each shard's master serves when it
// starts, by its own CLUSTER NODES line: the even layout of a cluster the
// operator left, and whatever layout the nodes report otherwise (here one
// off the even spread; the planner would move it back before a backup
// starts, so the sources are asked for directly).
func TestShardedBackupRecordsTheLayout(t *testing.T) {
	g := NewWithT(t)
	c, s := formedCluster(t, 3, 2)
	a := Next(c.fresh(takingBackup(s, BackupState{Name: "b", Exists: true})))
	g.Expect(a.Type).To(Equal(ActionRunShardedBackup))
	for i, src := range a.Sources {
		g.Expect(src.Slots).To(Equal([]probe.SlotRange{EvenSlots(i, 3)}))
	}

	c.byName("c-0").slots = []probe.SlotRange{rng(0, 99), rng(200, 5461)}
	c.byName("c-2").slots = []probe.SlotRange{rng(100, 199), rng(5462, 10922)}
	srcs, wait := newShardedView(c.fresh(s)).backupSources(nil)
	g.Expect(wait).To(BeEmpty())
	g.Expect(srcs[0].Slots).To(Equal([]probe.SlotRange{rng(0, 99), rng(200, 5461)}))
	g.Expect(srcs[1].Slots).To(Equal([]probe.SlotRange{rng(100, 199), rng(5462, 10922)}))
	g.Expect(srcs[2].Slots).To(Equal([]probe.SlotRange{rng(10923, 16383)}))
}

// One operation at a time: a backup starts only when no resharding is
// due, waits (Queued says so) while one runs, holds a resharding while
// its dumps stream, and gives way to one while it does not stream.
func TestShardedBackupAndResharding(t *testing.T) {
	g := NewWithT(t)
	c, s := formedCluster(t, 3, 2)

	// Nothing else to do: the pending backup starts.
	s.PendingBackup = "b"
	a := Next(c.fresh(s))
	g.Expect(a.Type).To(Equal(ActionStartOperation))
	g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationBackup))
	g.Expect(a.Operation.Backup).To(Equal("b"))

	// spec.shards changed as well: the resharding goes first.
	grown := s
	grown.Spec.Replicas = 8
	c.shards = 4
	a, _ = c.until(t, grown, ActionStartOperation)
	g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationScaling))

	// While it moves slots the backup waits, and says so.
	moving := grown
	moving.Operation = a.Operation.DeepCopy()
	moving.Operation.ID = "op2"
	// It starts once the resharding has ended.
	steps := 0
	for ; steps < 500; steps++ {
		f := c.fresh(moving)
		a = Next(f)
		if f.Operation == nil {
			break
		}
		g.Expect(a.Type).NotTo(Equal(ActionRunShardedBackup))
		g.Expect(a.Type).NotTo(Equal(ActionWait), "%s", a)
		g.Expect(Queued(f)).To(Equal("backup b: waits for Scaling op2 to finish"))
		c.apply(t, &f, a)
		moving = f
	}
	g.Expect(steps).To(BeNumerically(">", 10))
	g.Expect(a.Type).To(Equal(ActionStartOperation))
	g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationBackup))
	c, s = formedCluster(t, 3, 2)

	// A backup that streams holds a resharding asked for meanwhile.
	streaming := takingBackup(s, BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupRunning, Running: true})
	streaming.PendingBackup = ""
	streaming.Spec.Replicas = 8
	c.shards = 4
	a, f := c.until(t, streaming, ActionWait, ActionStartOperation, ActionResizeShards)
	g.Expect(a.Type).To(Equal(ActionWait), "%s", a)
	streaming.Sharded.Recorded = f.Sharded.Recorded
	g.Expect(a.Reason).To(Equal("backup b is streaming the dumps of 4 shards"))
	g.Expect(Queued(c.fresh(streaming))).To(Equal("shards 3→4: waits for Backup op1 to finish"))

	// One that does not stream (waiting for its retry) gives way: the
	// operation ends, the CacheBackup stays Pending for after it.
	waiting := streaming
	waiting.Backup = &BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupPending, Attempts: 1, RetryAt: now.Add(5e9)}
	a = Next(c.fresh(waiting))
	g.Expect(a.Type).To(Equal(ActionCompleteOperation), "%s", a)
	g.Expect(a.Reason).To(HavePrefix("backup b waits for resharding: spec.shards 3 → 4"))

	// A completed backup's operation ends even while a shard's master is
	// down and the cluster serves no longer every slot.
	c.shards = 3
	done := takingBackup(s, BackupState{Name: "b", Exists: true, Phase: cachev1alpha1.BackupCompleted})
	c.byName("c-2").down = true
	a = Next(c.fresh(done))
	g.Expect(a.Type).To(Equal(ActionCompleteOperation), "%s", a)
	g.Expect(a.Reason).To(Equal("backup b completed"))
	c.byName("c-2").down = false

	// A slot left moving (an operator killed mid-migration, no
	// operation recorded) is a resharding, not a backup's to wait on.
	c.byName("c-2").importing = map[int]string{100: c.byName("c-0").id}
	c.byName("c-0").migrating = map[int]string{100: c.byName("c-2").id}
	s.PendingBackup = "b"
	a = Next(c.fresh(s))
	g.Expect(a.Type).To(Equal(ActionStartOperation))
	g.Expect(a.Operation.Type).To(Equal(cachev1alpha1.OperationScaling))
}
