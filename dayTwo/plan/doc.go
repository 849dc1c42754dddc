// Package plan is the day-two planner: a pure function from what was
// observed of a cluster (a Snapshot: its pods and what their Redis last
// answered, its spec, status, StatefulSet, backups) to the one next step
// (an Action). Every rule of day-two lives here, one file per concern:
//
//   - plan.go: the entry (Next), bootstrap, a dead master, the roles;
//   - failover.go: what happens when the master dies, step by step;
//   - operations.go: scaling, rolling upgrades and their rollback,
//     configuration changes, switchovers;
//   - restore.go: a lost dataset and its recovery;
//   - backup.go, schedule.go, retention.go: which replica a dump is
//     taken from, when a backup is due, which backups retention removes;
//   - recommend.go: capacity recommendations;
//   - simulate.go: the same rules played on a model cluster, for
//     `kubectl cache plan`.
//
// It must not do anything: no network, no Kubernetes client, no clock (the
// snapshot carries Now), no randomness, no logging. The same snapshot
// always gives the same action, so a decision can be tested, logged and
// replayed, and a step taken twice (an operator restarted after acting,
// before seeing the effect) is planned again only from what the pods
// report.
package plan
