// Package recommend turns a CacheCluster's status.recommendations into a
// pull request's worth of git work: the manifest edited in place (comments,
// key order and quoting kept, only the recommended values changed) and a
// commit on a new branch whose message carries the evidence, pushed to the
// repository's remote for the pull request.
//
// It must not talk to a Kubernetes API server or to Redis: the
// recommendations come from the caller. It writes only the one manifest it
// was given, inside the git checkout it was given, and commits only that
// file; it pushes only the branch it committed on, when asked (Push), never
// with force, and never applies a recommendation made for a value the
// manifest no longer holds.
package recommend
