package argocd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Repo is a git server's repository (a bare repository, which Argo CD reads
// through its file:// URL) and a work tree cloned from it: the platform
// team's checkout, whose commits on main are pushed at once, as merged pull
// requests would be.
type Repo struct {
	// Dir is the work tree.
	Dir string
	// Remote is the bare repository, the work tree's origin.
	Remote string
}

// InitRepo creates an empty bare repository in dir/remote.git and its work
// tree in dir/work, with a branch main.
func InitRepo(dir string) (*Repo, error) {
	r := &Repo{Dir: filepath.Join(dir, "work"), Remote: filepath.Join(dir, "remote.git")}
	for _, d := range []string{r.Dir, r.Remote} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if _, err := gitIn(r.Remote, "init", "--quiet", "--bare", "--initial-branch=main"); err != nil {
		return nil, err
	}
	if _, err := r.git("init", "--quiet", "--initial-branch=main"); err != nil {
		return nil, err
	}
	if _, err := r.git("remote", "add", "origin", r.Remote); err != nil {
		return nil, err
	}
	return r, nil
}

// URL is the repository's address for an Application's repoURL.
func (r *Repo) URL() string { return "file://" + r.Remote }

// Write puts content at path (relative to the work tree) without committing.
func (r *Repo) Write(path, content string) error {
	full := filepath.Join(r.Dir, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	return os.WriteFile(full, []byte(content), 0o644)
}

// CopyDir copies the folder src (a chart, say) to path in the work tree
// without committing.
func (r *Repo) CopyDir(src, path string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return r.Write(filepath.Join(path, rel), string(data))
	})
}

// Remove deletes path from the work tree and the index without committing.
func (r *Repo) Remove(path string) error {
	_, err := r.git("rm", "-q", path)
	return err
}

// Commit records every change in the work tree on main, pushes it to the
// bare repository and returns the commit's hash.
func (r *Repo) Commit(message string) (string, error) {
	if _, err := r.git("add", "-A"); err != nil {
		return "", err
	}
	if _, err := r.git("commit", "-q", "-m", message); err != nil {
		return "", err
	}
	if _, err := r.git("push", "-q", "origin", "main"); err != nil {
		return "", err
	}
	return r.git("rev-parse", "HEAD")
}

// Merge merges branch of the bare repository into main with a merge
// commit, as a git server merges a pull request, pushes main and returns
// the merge commit's hash.
func (r *Repo) Merge(branch, message string) (string, error) {
	if _, err := r.git("fetch", "-q", "origin", branch); err != nil {
		return "", err
	}
	if _, err := r.git("merge", "-q", "--no-ff", "-m", message, "FETCH_HEAD"); err != nil {
		return "", err
	}
	if _, err := r.git("push", "-q", "origin", "main"); err != nil {
		return "", err
	}
	return r.git("rev-parse", "HEAD")
}

// Clone clones the bare repository into dir: another person's checkout.
func (r *Repo) Clone(dir string) error {
	_, err := gitIn("", "clone", "-q", r.Remote, dir)
	return err
}

func (r *Repo) git(args ...string) (string, error) { return gitIn(r.Dir, args...) }

// gitIn runs git in dir with a fixed identity, and nothing from the user's
// git configuration.
func gitIn(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
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
