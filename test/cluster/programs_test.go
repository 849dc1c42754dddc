package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// privateProgram writes a script under a folder only its owner can enter,
// as a checkout in a `mktemp -d` folder is.
func privateProgram(t *testing.T) string {
	t.Helper()
	private := t.TempDir()
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	program := filepath.Join(private, "checkout", "bin", "manager")
	if err := os.MkdirAll(filepath.Dir(program), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(program, []byte("#!/bin/sh\necho manager\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return program
}

// sharedDir is a folder every user can reach, as a state folder may be.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "cacheops-programs-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestStageProgramsCopiesWhatOthersCannotRun(t *testing.T) {
	program := privateProgram(t)
	if err := runnableByOthers(program); err == nil || !strings.Contains(err.Error(), filepath.Dir(filepath.Dir(filepath.Dir(program)))) {
		t.Fatalf("runnableByOthers(%s) = %v, want an error naming the private folder", program, err)
	}
	for _, tc := range []struct {
		name     string
		stateDir string
		wantIn   string
	}{
		{name: "state folder reachable: copies go into it", stateDir: sharedDir(t), wantIn: "programs"},
		{name: "state folder private: copies go to /var/tmp", stateDir: t.TempDir(), wantIn: "/var/tmp/cacheops-programs-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			images := []Image{
				OperatorImage(program),
				{Pattern: "redis:*", Entrypoint: "/bin/sh", Binaries: map[string]string{"sh": "/bin/sh", "manager": program}},
			}
			got, dir, err := stagePrograms(images, tc.stateDir)
			if err != nil {
				t.Fatal(err)
			}
			if dir == "" {
				t.Fatal("no folder for the copies")
			}
			defer os.RemoveAll(dir)
			if !strings.Contains(dir, tc.wantIn) {
				t.Errorf("copies in %s, want in %s", dir, tc.wantIn)
			}
			op := got[0]
			if op.Entrypoint == program || op.Entrypoint != op.Binaries["manager"] || op.Entrypoint != got[1].Binaries["manager"] {
				t.Fatalf("operator image %+v: want one copy of %s for every use", op, program)
			}
			if filepath.Base(op.Entrypoint) != "manager" {
				t.Errorf("copy %s does not keep the base name (multi-call binaries read argv[0])", op.Entrypoint)
			}
			if err := runnableByOthers(op.Entrypoint); err != nil {
				t.Errorf("the copy is not runnable by others: %v", err)
			}
			data, err := os.ReadFile(op.Entrypoint)
			if err != nil || string(data) != "#!/bin/sh\necho manager\n" {
				t.Errorf("copy holds %q, %v", data, err)
			}
			if got[1].Entrypoint != "/bin/sh" || got[1].Binaries["sh"] != "/bin/sh" {
				t.Errorf("a program others can run is copied: %+v", got[1])
			}
			if images[0].Entrypoint != program {
				t.Errorf("the caller's images were changed")
			}
		})
	}
}

func TestStageProgramsCopiesNothingWhenEveryoneCanRunIt(t *testing.T) {
	// A program that is not installed stays as it is: only a container
	// that runs it fails.
	images := append(DefaultImages(), Image{Pattern: "missing:*", Entrypoint: "/nonexistent/redis-sentinel"})
	got, dir, err := stagePrograms(images, t.TempDir())
	if err != nil || dir != "" {
		t.Fatalf("stagePrograms(DefaultImages()) = dir %q, err %v; want no copies", dir, err)
	}
	if got[0].Entrypoint != "/usr/bin/redis-server" || got[len(got)-1].Entrypoint != "/nonexistent/redis-sentinel" {
		t.Errorf("entrypoints %s, %s changed", got[0].Entrypoint, got[len(got)-1].Entrypoint)
	}
}

func TestStageProgramsRefusesWhenNoFolderIsReachable(t *testing.T) {
	program := privateProgram(t)
	stateDir, shared := t.TempDir(), t.TempDir() // both 0700
	defer func(old string) { sharedProgramParent = old }(sharedProgramParent)
	sharedProgramParent = shared
	_, dir, err := stagePrograms([]Image{OperatorImage(program)}, stateDir)
	if err == nil {
		os.RemoveAll(dir)
		t.Fatal("stagePrograms succeeded without a folder other users can reach")
	}
	t.Log(err)
	for _, want := range []string{program, "state folder " + stateDir, shared, "chmod o+x"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
