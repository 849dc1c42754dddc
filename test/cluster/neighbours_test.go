package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The neighbour table is raised for a cluster's pods and never lowered;
// on copies of the kernel's files (Linux's defaults), not the machine's.
func TestNeighbourTableIsRaisedNeverLowered(t *testing.T) {
	dir := t.TempDir()
	file := func(i int) string { return filepath.Join(dir, fmt.Sprintf("gc_thresh%d", i)) }
	for i, v := range []string{"128\n", "512\n", "1024\n"} {
		if err := os.WriteFile(file(i+1), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	limits := func() [3]int {
		var got [3]int
		for i := range got {
			v, err := readInt(file(i + 1))
			if err != nil {
				t.Fatal(err)
			}
			got[i] = v
		}
		return got
	}
	if changed, err := sizeNeighbourTable(dir, 3); err != nil || changed != "" {
		t.Fatalf("3 pods: want nothing changed, got %q, %v", changed, err)
	}
	// 330 pods (three default nodes): 2,640 entries.
	changed, err := sizeNeighbourTable(dir, 330)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := limits(), [3]int{660, 1320, 2640}; got != want {
		t.Errorf("for 330 pods: %v, want %v (%s)", got, want, changed)
	}
	// Fewer pods later (another, smaller cluster): nothing is lowered.
	if changed, err := sizeNeighbourTable(dir, 100); err != nil || changed != "" {
		t.Fatalf("100 pods after 330: want nothing changed, got %q, %v", changed, err)
	}
	if got, want := limits(), [3]int{660, 1320, 2640}; got != want {
		t.Errorf("after a smaller cluster: %v, want %v", got, want)
	}
	if _, err := sizeNeighbourTable(filepath.Join(dir, "missing"), 330); err == nil {
		t.Error("no such files: want an error")
	}
}
