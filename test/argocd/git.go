package argocd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Repo is a local git repository with a branch main, which Argo CD reads
// through its file:// URL.
type Repo struct {
	// Dir is the work tree.
	Dir string
}

// InitRepo creates an empty repository in dir.
func InitRepo(dir string) (*Repo, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	r := &Repo{Dir: dir}
	if _, err := r.git("init", "--initial-branch=main"); err != nil {
		return nil, err
	}
	return r, nil
}

// URL is the repository's address for an Application's repoURL.
func (r *Repo) URL() string { return "file://" + r.Dir }

// Write puts content at path (relative to the work tree) without committing.
func (r *Repo) Write(path, content string) error {
	full := filepath.Join(r.Dir, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	return os.WriteFile(full, []byte(content), 0o644)
}

// Remove deletes path from the work tree and the index without committing.
func (r *Repo) Remove(path string) error {
	_, err := r.git("rm", "-q", path)
	return err
}

// Commit records every change in the work tree and returns the commit's
// hash.
func (r *Repo) Commit(message string) (string, error) {
	if _, err := r.git("add", "-A"); err != nil {
		return "", err
	}
	if _, err := r.git("commit", "-q", "-m", message); err != nil {
		return "", err
	}
	return r.git("rev-parse", "HEAD")
}

func (r *Repo) git(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = r.Dir
	// A fixed identity, and nothing from the user's git configuration.
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=cacheops e2e", "GIT_AUTHOR_EMAIL=e2e@cacheops.invalid",
		"GIT_COMMITTER_NAME=cacheops e2e", "GIT_COMMITTER_EMAIL=e2e@cacheops.invalid",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
