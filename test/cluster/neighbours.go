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

// sizeNeighbourTable raises the kernel's neighbour table limits
// (gc_thresh1..3 in dir, neighbourDir but in tests) to hold pods pods, and never lowers them. The table is
// one for the whole machine, every network namespace included, and
// Linux's defaults (gc_thresh3 1024 entries) hold a few hundred pods:
// past that the kernel logs "neighbor table overflow!" and drops packets
// to pods. In the scale benchmark at 900 pods that was 597 containers
// killed by probes whose connections timed out, and replicas that could
// not link to their master. A large node raises these limits the same way.
//
// They are not put back when the cluster stops: clusters on other bridges
// may run at the same time and need them, and higher limits cost nothing
// until used. It returns what it changed, for the log.
func sizeNeighbourTable(dir string, pods int) (string, error) {
	want := pods * entriesPerPod
	// gc_thresh1: no collection below it; gc_thresh2: collected after 5 s
	// above it; gc_thresh3: the hard limit.
	goal := [3]int{want / 4, want / 2, want}
	var changed []string
	for i := 2; i >= 0; i-- {
		path := filepath.Join(dir, fmt.Sprintf("gc_thresh%d", i+1))
		v, err := readInt(path)
		if err != nil {
			return strings.Join(changed, ", "), err
		}
		if v >= goal[i] {
			continue
		}
		if err := os.WriteFile(path, []byte(strconv.Itoa(goal[i])), 0o644); err != nil {
			return strings.Join(changed, ", "), err
		}
		changed = append(changed, fmt.Sprintf("gc_thresh%d %d → %d", i+1, v, goal[i]))
	}
	return strings.Join(changed, ", "), nil
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
