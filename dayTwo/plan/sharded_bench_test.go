package plan

import "testing"

// BenchmarkPlanSteady is one planning pass of a cluster with nothing to
// do, the cost every routine reconcile pays: a sharded cluster of 3 × 2
// pods beside the baseline, a replication cluster of 3 pods.
func BenchmarkPlanSteady(b *testing.B) {
	c := newRedisCluster(3, 2)
	_, sharded := c.run(b, c.snapshot())
	replication := steady(Snapshot{CurrentMaster: "c-0", AutoFailover: true, ProbeTimeout: 5e9, Now: now, Pods: healthyCluster()})
	for _, bc := range []struct {
		name string
		s    Snapshot
	}{{"baseline", replication}, {"sharded", sharded}} {
		b.Run(bc.name, func(b *testing.B) {
			if a := Next(bc.s); a.Type != ActionNone {
				b.Fatalf("a steady cluster plans %s", a)
			}
			b.ReportAllocs()
			for b.Loop() {
				Next(bc.s)
			}
		})
	}
}
