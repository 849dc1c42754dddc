package cluster

import (
	"os"
	"testing"
)

// The neighbour table is raised for a cluster's pods, never lowered, and
// put back as it was.
func TestNeighbourTableIsSizedAndRestored(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sizing the kernel's neighbour table needs root, as the process-backed node does")
	}
	var was [3]int
	for i := range was {
		v, err := readInt(neighbourFile(i))
		if err != nil {
			t.Fatal(err)
		}
		was[i] = v
	}
	if tbl, err := sizeNeighbourTable(1); err != nil || tbl != nil {
		t.Fatalf("one pod: want nothing changed, got %v, %v", tbl, err)
	}
	pods := was[2]/entriesPerPod + 100
	tbl, err := sizeNeighbourTable(pods)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.restore()
	for i, want := range [3]int{max(was[0], pods*entriesPerPod/4), max(was[1], pods*entriesPerPod/2), pods * entriesPerPod} {
		if got, _ := readInt(neighbourFile(i)); got != want {
			t.Errorf("gc_thresh%d for %d pods: %d, want %d", i+1, pods, got, want)
		}
	}
	tbl.restore()
	for i := range was {
		if got, _ := readInt(neighbourFile(i)); got != was[i] {
			t.Errorf("gc_thresh%d after restore: %d, want %d", i+1, got, was[i])
		}
	}
}
