// Package probe watches every pod's Redis: one goroutine per pod sends
// INFO every probe period, keeps the latest Observation of each pod, and
// wakes the day-two controller when something significant changed (a pod
// stopped answering, changed role, master or replication ID).
//
// It only reads: it never sends a command that changes Redis, never talks
// to the Kubernetes API server and never decides anything — the planner
// (dayTwo/plan) judges what it saw.
package probe
