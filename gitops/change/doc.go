// Package change tells what a change to CacheCluster manifests does, for a
// pull request's review. It loads the manifests of two states (a file, a
// folder or a git revision each), diffs the objects the renderer makes of
// both sides, asks the day-two simulation which operations the change
// triggers, and writes the result as terminal text, pull-request markdown
// or JSON.
//
// It must not talk to a Kubernetes API server or to Redis: what a running
// cluster says (its master, an operation in progress) comes from the caller
// as Live. It only reads files and git revisions, and never writes to them.
// It holds no rule of its own about what day-two does: it asks the day-two
// planner, and only simulate.go names that package.
package change
