package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// neighbourDir holds the kernel's IPv4 neighbour (ARP) table limits.
const neighbourDir = "/proc/sys/net/ipv4/neigh/default"

// entriesPerPod is how many neighbour entries one pod costs: the host's
// entry for the pod, and the pod's own for the gateway and the peers it
// talks to (its master, its replicas, a client).
const entriesPerPod = 8

// neighbourTable is the kernel's neighbour table, sized for a cluster. It
// is one table for the whole machine, every network namespace included,
// and Linux's defaults (gc_thresh3 1024 entries) hold a few hundred pods:
// past that the kernel logs "neighbor table overflow!" and drops packets
// to pods. In the scale benchmark at 900 pods that was 187 containers
// killed by liveness probes whose connections timed out, and replicas
// that could not link to their master, on a machine whose CPU was not
// the cause. A large node raises these limits the same way.
type neighbourTable struct {
	was, set [3]int
}

// sizeNeighbourTable raises gc_thresh1..3 to hold pods pods, never lowers
// them, and returns what restore puts back (nil when nothing changed).
func sizeNeighbourTable(pods int) (*neighbourTable, error) {
	t := &neighbourTable{}
	want := pods * entriesPerPod
	// gc_thresh1: no collection below it; gc_thresh2: collected after 5 s
	// above it; gc_thresh3: the hard limit.
	goal := [3]int{want / 4, want / 2, want}
	changed := false
	for i := range t.was {
		v, err := readInt(neighbourFile(i))
		if err != nil {
			return nil, err
		}
		t.was[i], t.set[i] = v, max(v, goal[i])
		changed = changed || t.set[i] != v
	}
	if !changed {
		return nil, nil
	}
	// The hard limit first: gc_thresh2 must not exceed it on the way up.
	for i := 2; i >= 0; i-- {
		if err := os.WriteFile(neighbourFile(i), []byte(strconv.Itoa(t.set[i])), 0o644); err != nil {
			return nil, fmt.Errorf("sizing the neighbour table for %d pods (needs root): %w", pods, err)
		}
	}
	return t, nil
}

// restore puts back the limits found, unless someone changed them since.
func (t *neighbourTable) restore() {
	if t == nil {
		return
	}
	for i := 0; i < 3; i++ {
		if v, err := readInt(neighbourFile(i)); err == nil && v == t.set[i] {
			_ = os.WriteFile(neighbourFile(i), []byte(strconv.Itoa(t.was[i])), 0o644)
		}
	}
}

func neighbourFile(i int) string {
	return filepath.Join(neighbourDir, fmt.Sprintf("gc_thresh%d", i+1))
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
