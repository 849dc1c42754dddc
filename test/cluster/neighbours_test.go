package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The neighbour table is raised for a cluster's pods and never lowered.
// (The limits raised stay: the test sizes the table for as many pods as
// the machine's limit already holds, plus one, so it changes it by 8
// entries at most.)
func TestNeighbourTableIsRaisedNeverLowered(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sizing the kernel's neighbour table needs root, as the process-backed node does")
	}
	limit := func(i int) int {
		v, err := readInt(filepath.Join(neighbourDir, fmt.Sprintf("gc_thresh%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if changed, err := sizeNeighbourTable(1); err != nil || changed != "" {
		t.Fatalf("one pod: want nothing changed, got %q, %v", changed, err)
	}
	pods := limit(3)/entriesPerPod + 1
	changed, err := sizeNeighbourTable(pods)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("for %d pods: %s", pods, changed)
	if got := limit(3); got != pods*entriesPerPod {
		t.Errorf("gc_thresh3 for %d pods: %d, want %d", pods, got, pods*entriesPerPod)
	}
	if got := limit(2); got < pods*entriesPerPod/2 {
		t.Errorf("gc_thresh2 for %d pods: %d, want at least %d", pods, got, pods*entriesPerPod/2)
	}
}
