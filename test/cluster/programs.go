package cluster

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// Containers run their program after pod-init has dropped root: the
// operator's image runs as 65532, the chart's Redis pods as 999. exec then
// needs search permission, as that user, on every folder of the program's
// path. A checkout under a folder other users cannot enter (any `mktemp -d`
// folder, a home folder with mode 700) breaks that, and the container dies
// with nothing but "pod-init: permission denied" in its log. So Start
// copies every image program that other users could not run into a folder
// they can reach, and points the images at the copies. The copies are taken
// once, at Start: a program rebuilt afterwards is not seen until the next
// Start.

// stagePrograms returns images whose programs any user can run, and the
// folder it copied programs into ("" when none needed a copy; the caller
// removes it when the cluster stops). The copies go to stateDir/programs
// when other users can reach stateDir, else to a new folder in /var/tmp.
func stagePrograms(images []Image, stateDir string) ([]Image, string, error) {
	var dir string
	copies := map[string]string{} // original path → copy
	stage := func(program string) (string, error) {
		if program == "" || runnableByOthers(program) == nil {
			return program, nil
		}
		if _, err := os.Stat(program); err != nil {
			// Not installed (redis-sentinel often is not): a container
			// that runs it fails as it would have without the copy.
			return program, nil
		}
		if c, ok := copies[program]; ok {
			return c, nil
		}
		if dir == "" {
			var err error
			if dir, err = programDir(stateDir, program); err != nil {
				return "", err
			}
		}
		// One folder per program keeps its base name: multi-call binaries
		// (redis-server as redis-check-rdb) choose by argv[0].
		sub := filepath.Join(dir, strconv.Itoa(len(copies)))
		dst := filepath.Join(sub, filepath.Base(program))
		if err := os.Mkdir(sub, 0o755); err != nil {
			return "", err
		}
		if err := copyProgram(program, dst); err != nil {
			return "", fmt.Errorf("cluster: copying %s where non-root containers can run it: %w", program, err)
		}
		copies[program] = dst
		return dst, nil
	}
	out := make([]Image, len(images))
	for i, im := range images {
		var err error
		if im.Entrypoint, err = stage(im.Entrypoint); err != nil {
			return nil, dir, err
		}
		bins := make(map[string]string, len(im.Binaries))
		for name, program := range im.Binaries {
			if bins[name], err = stage(program); err != nil {
				return nil, dir, err
			}
		}
		im.Binaries = bins
		out[i] = im
	}
	return out, dir, nil
}

// sharedProgramParent holds the copies when the state folder is private;
// a variable for tests.
var sharedProgramParent = "/var/tmp"

// programDir creates the folder copies go to, readable and searchable by
// everyone along its whole path.
func programDir(stateDir, program string) (string, error) {
	if searchableByOthers(stateDir) == nil {
		dir := filepath.Join(stateDir, "programs")
		if err := os.RemoveAll(dir); err != nil {
			return "", err
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", err
		}
		return dir, os.Chmod(dir, 0o755) // whatever the umask
	}
	shared := sharedProgramParent
	if err := searchableByOthers(shared); err != nil {
		return "", fmt.Errorf("cluster: non-root containers cannot run %s (%v), and there is no folder to copy it to that they can reach: neither the state folder %s (%v) nor %s (%v); make one of them searchable by other users (chmod o+x)",
			program, runnableByOthers(program), stateDir, searchableByOthers(stateDir), shared, err)
	}
	dir, err := os.MkdirTemp(shared, "cacheops-programs-")
	if err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o755)
}

// runnableByOthers tells, by the permission bits alone, whether a user
// that neither owns the program nor shares its group can exec it: a
// regular file readable (scripts are read by their interpreter) and
// executable by others, behind folders they can search. Symbolic links
// are followed; the folders of both the given and the resolved path count.
func runnableByOthers(program string) error {
	abs, err := filepath.Abs(program)
	if err != nil {
		return err
	}
	if err := searchableByOthers(filepath.Dir(abs)); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err
	}
	if err := searchableByOthers(filepath.Dir(real)); err != nil {
		return err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o005 != 0o005 {
		return fmt.Errorf("%s has mode %04o: other users cannot read and execute it", real, fi.Mode().Perm())
	}
	return nil
}

// searchableByOthers tells whether other users can search (traverse) dir
// and every folder above it, naming the first that they cannot.
func searchableByOthers(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for d := abs; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("folder %s has mode %04o: other users cannot enter it", d, fi.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// copyProgram copies a program (following symbolic links) to dst with mode
// 0755.
func copyProgram(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, 0o755)
}
