package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// podInitName is the argv[0] under which a binary that imports this package
// becomes the first process of a container: it joins the pod's network
// namespace, bind-mounts the pod's volumes in its own mount namespace, drops
// to the pod's user and execs the container's program. Go cannot run code
// between fork and exec, so the node starts /proc/self/exe under this name
// (the pattern runc and Docker's reexec use).
const podInitName = "cacheops-pod-init"

// initSpec is what the node hands to the pod init, as a JSON file.
type initSpec struct {
	NetNS    string      `json:"netns,omitempty"`
	Hostname string      `json:"hostname,omitempty"`
	Mounts   []initMount `json:"mounts,omitempty"`
	UID      *int64      `json:"uid,omitempty"`
	GID      *int64      `json:"gid,omitempty"`
	Groups   []int64     `json:"groups,omitempty"`
	WorkDir  string      `json:"workDir,omitempty"`
	Path     string      `json:"path"`
	Args     []string    `json:"args"`
	Env      []string    `json:"env"`
}

type initMount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

func init() {
	if filepath.Base(os.Args[0]) != podInitName {
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "pod-init: usage: cacheops-pod-init SPEC.json")
		os.Exit(127)
	}
	err := podInit(os.Args[1])
	fmt.Fprintln(os.Stderr, "pod-init:", err)
	os.Exit(127)
}

// podInit does not return on success: it ends in exec.
func podInit(specFile string) error {
	// Namespaces are per thread; exec happens on this one.
	runtime.LockOSThread()
	data, err := os.ReadFile(specFile)
	if err != nil {
		return err
	}
	// The spec holds the container's environment (passwords among it).
	_ = os.Remove(specFile)
	var s initSpec
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	if s.NetNS != "" {
		fd, err := unix.Open(s.NetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening %s: %w", s.NetNS, err)
		}
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("joining %s: %w", s.NetNS, err)
		}
		_ = unix.Close(fd)
	}
	if s.Hostname != "" {
		_ = unix.Sethostname([]byte(s.Hostname))
	}
	// The node started us in a new mount namespace; keep our mounts in it.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	// A mount can hide the source of a later one (the pod's /tmp over the
	// node's folders under /tmp, where a secret volume after it lives):
	// every source is opened first and mounted through its descriptor, as
	// runc does.
	sources := make([]string, len(s.Mounts))
	for i, m := range s.Mounts {
		fd, err := unix.Open(m.Source, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening %s: %w", m.Source, err)
		}
		sources[i] = fmt.Sprintf("/proc/self/fd/%d", fd)
	}
	for i, m := range s.Mounts {
		if err := os.MkdirAll(m.Target, 0o755); err != nil {
			return fmt.Errorf("mount point %s: %w", m.Target, err)
		}
		if err := unix.Mount(sources[i], m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mounting %s at %s: %w", m.Source, m.Target, err)
		}
		if m.ReadOnly {
			if err := unix.Mount("", m.Target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("remounting %s read-only: %w", m.Target, err)
			}
		}
	}
	if s.WorkDir != "" {
		if err := os.Chdir(s.WorkDir); err != nil {
			return fmt.Errorf("working dir %s: %w", s.WorkDir, err)
		}
	}
	if s.GID != nil || s.UID != nil || len(s.Groups) > 0 {
		groups := make([]int, 0, len(s.Groups))
		for _, g := range s.Groups {
			groups = append(groups, int(g))
		}
		if err := syscall.Setgroups(groups); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
	}
	if s.GID != nil {
		if err := syscall.Setgid(int(*s.GID)); err != nil {
			return fmt.Errorf("setgid %d: %w", *s.GID, err)
		}
	}
	if s.UID != nil {
		if err := syscall.Setuid(int(*s.UID)); err != nil {
			return fmt.Errorf("setuid %d: %w", *s.UID, err)
		}
	}
	// Changing credentials clears the parent-death signal; set it again so
	// the container dies with the node process that started it.
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0)
	err = syscall.Exec(s.Path, append([]string{s.Path}, s.Args...), s.Env)
	uid := "root"
	if s.UID != nil {
		uid = fmt.Sprintf("uid %d", *s.UID)
	}
	return fmt.Errorf("exec %s as %s: %w", s.Path, uid, err)
}
