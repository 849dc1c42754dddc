// Package gitcmd runs the git command line for the gitops packages, with
// the command and git's own message in every error.
//
// It must not choose what to run: callers name every argument, including
// -C for the repository they were given. It never talks to a Kubernetes API
// server or to Redis.
package gitcmd
