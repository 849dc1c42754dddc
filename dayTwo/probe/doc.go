// Package probe watches every pod's Redis: one goroutine per cluster sends
// INFO to each of its pods every probe period, at once, on one persistent
// connection per pod (conn.go: reconnect with backoff, one deadline per
// command, as a new connection per probe had); it keeps the latest
// Observation of each pod (info.go reads INFO) and wakes the day-two
// controller when something significant changed (a pod stopped
// answering, changed role, master or replication ID).
//
// It only reads: it never sends a command that changes Redis, never talks
// to the Kubernetes API server and never decides anything — the planner
// (dayTwo/plan) judges what it saw.
package probe
