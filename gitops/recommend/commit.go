package recommend

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/gitops/internal/gitcmd"
)

// DefaultBranch is the branch Commit is asked to use when the caller
// names none: cacheops/recommend-NAMESPACE-NAME-TIME, TIME in UTC.
func DefaultBranch(namespace, name string, now time.Time) string {
	return fmt.Sprintf("cacheops/recommend-%s-%s-%s", namespace, name, now.UTC().Format("20060102-150405"))
}

// Commit writes the recommendations into the manifest of CacheCluster
// namespace/name at path (relative to the git checkout repo), keeping its
// comments and layout, and commits the change on a new branch with the
// evidence in the message. It returns the commit's hash. A path that
// leaves repo (.., absolute, or through a symbolic link) is refused before
// anything is written.
func Commit(repo, path, namespace, name string, recs []cachev1alpha1.Recommendation, branch string) (string, error) {
	if !filepath.IsLocal(path) {
		return "", fmt.Errorf("%s: not a path inside the checkout %s", path, repo)
	}
	data, err := os.ReadFile(filepath.Join(repo, path))
	if err != nil {
		return "", err
	}
	out, applied, err := Edit(data, namespace, name, recs)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if len(applied) == 0 {
		return "", fmt.Errorf("%s: the manifest already holds every recommended value", path)
	}
	if err := writeInside(repo, path, out); err != nil {
		return "", err
	}
	return commitFile(repo, path, branch, message(namespace, name, applied))
}

// writeInside writes the file at path in repo through an os.Root, which
// refuses a symbolic link that leads out of repo.
func writeInside(repo, path string, data []byte) error {
	root, err := os.OpenRoot(repo)
	if err != nil {
		return err
	}
	defer root.Close()
	return root.WriteFile(path, data, 0o644)
}

// commitFile commits path, and only path whatever else is staged in the
// checkout, on a new branch. A checkout without a git identity commits as
// kubectl-cache.
func commitFile(repo, path, branch, msg string) (string, error) {
	g := func(args ...string) (string, error) { return gitcmd.Run(append([]string{"-C", repo}, args...)...) }
	if _, err := g("checkout", "-b", branch); err != nil {
		return "", err
	}
	if _, err := g("add", path); err != nil {
		return "", err
	}
	args := []string{"commit", "-q", "-m", msg, "--", path}
	if who, _ := g("config", "user.name"); strings.TrimSpace(who) == "" {
		args = append([]string{"-c", "user.name=kubectl-cache", "-c", "user.email=kubectl-cache@localhost"}, args...)
	}
	if _, err := g(args...); err != nil {
		return "", err
	}
	sha, err := g("rev-parse", "HEAD")
	return strings.TrimSpace(sha), err
}

// message is the commit message: the changes in the title, the evidence
// of each in the body.
func message(namespace, name string, applied []cachev1alpha1.Recommendation) string {
	var title []string
	var body strings.Builder
	for _, r := range applied {
		title = append(title, fmt.Sprintf("%s %s→%s", strings.TrimPrefix(r.Field, "spec."), r.Current, r.Recommended))
		fmt.Fprintf(&body, "%s: %s → %s\n  Evidence: %s (since %s).\n", r.Field, r.Current, r.Recommended, r.Reason, r.Since.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("cacheops: %s/%s: %s\n\n%s\nRecommended by the cacheops operator (status.recommendations of CacheCluster %s/%s);\nwritten by kubectl cache recommend. Review, then merge to apply through GitOps.\n",
		namespace, name, strings.Join(title, ", "), body.String(), namespace, name)
}

// Push pushes branch of the checkout repo to its remote (origin when
// empty), where a pull request can be opened from it. It pushes only that
// branch, never with force: a branch of the same name that holds other
// commits is refused by the remote.
func Push(repo, remote, branch string) error {
	if remote == "" {
		remote = "origin"
	}
	_, err := gitcmd.Run("-C", repo, "push", "--quiet", "--set-upstream", remote, "refs/heads/"+branch+":refs/heads/"+branch)
	return err
}
