package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/gitops/recommend"
)

// recommendCmd commits a cluster's status.recommendations on a new branch
// of a git checkout and pushes it to the checkout's remote, for a pull
// request (package recommend); --no-push only commits.
func recommendCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("recommend", flag.ContinueOnError)
	var lf liveFlags
	lf.register(fs)
	repo := fs.String("repo", "", "a git checkout of the manifests")
	path := fs.String("path", "", "the manifest holding the CacheCluster, relative to --repo")
	branch := fs.String("branch", "", "the branch to commit on (default: cacheops/recommend-NAMESPACE-NAME-TIME)")
	from := fs.String("from", "", "read the CacheCluster (with its status) from this file instead of the cluster, e.g. kubectl get cc NAME -o yaml")
	remote := fs.String("remote", "origin", "the git remote to push the branch to")
	noPush := fs.Bool("no-push", false, "only commit on the new branch; push it yourself")
	name, err := parseNameFirst(fs, args)
	if err != nil {
		return err
	}
	if *repo == "" || *path == "" {
		return errors.New("recommend needs --repo DIR and --path FILE")
	}
	cc, err := readRecommended(lf, name, *from)
	if err != nil {
		return err
	}
	if len(cc.Status.Recommendations) == 0 {
		fmt.Fprintf(stdout, "CacheCluster %s/%s has no recommendation; nothing to do\n", cc.Namespace, name)
		return nil
	}
	if *branch == "" {
		*branch = recommend.DefaultBranch(cc.Namespace, name, time.Now())
	}
	commit, err := recommend.Commit(*repo, *path, cc.Namespace, name, cc.Status.Recommendations, *branch)
	if err != nil {
		return err
	}
	if *noPush {
		fmt.Fprintf(stdout, "committed %s on branch %s in %s; push it and open a pull request:\n  git -C %s push -u %s %s\n", commit[:12], *branch, *repo, *repo, *remote, *branch)
		return nil
	}
	if err := recommend.Push(*repo, *remote, *branch); err != nil {
		return fmt.Errorf("committed %s on branch %s in %s, but pushing it failed: %w", commit[:12], *branch, *repo, err)
	}
	fmt.Fprintf(stdout, "committed %s on branch %s in %s and pushed it to %s; open a pull request from %s\n", commit[:12], *branch, *repo, *remote, *branch)
	return nil
}

// readRecommended reads the CacheCluster with its status from the file
// from, or from the cluster when from is empty.
func readRecommended(lf liveFlags, name, from string) (*cachev1alpha1.CacheCluster, error) {
	if from == "" {
		_, cc, err := lf.get(name)
		return cc, err
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return nil, err
	}
	cc := &cachev1alpha1.CacheCluster{}
	if err := yaml.Unmarshal(data, cc); err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	return cc, nil
}
