// Package aof edits Redis append-only files for tests: it makes a master
// restart holding less than its replicas, as a postponed fsync or a lost
// page cache would.
package aof

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// NewestIncr is the incremental append-only file Redis writes to now, in
// its append-only folder dir.
func NewestIncr(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.incr.aof"))
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return "", fmt.Errorf("no incremental append-only file in %s", dir)
	}
	mtime := func(f string) int64 {
		st, err := os.Stat(f)
		if err != nil {
			return 0
		}
		return st.ModTime().UnixNano()
	}
	sort.Slice(files, func(i, j int) bool { return mtime(files[i]) < mtime(files[j]) })
	return files[len(files)-1], nil
}

// CutLastWrites truncates an append-only file before its last n SET
// commands (at a command boundary, so Redis loads it and appends after it)
// and returns how many bytes it cut.
func CutLastWrites(path string, n int) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// Redis writes commands to the file in lower case.
	set, lower := []byte("*3\r\n$3\r\nset\r\n"), bytes.ToLower(data)
	at := len(data)
	for i := range n {
		j := bytes.LastIndex(lower[:at], set)
		if j <= 0 {
			return 0, fmt.Errorf("%d SETs in %s, fewer than %d", i, path, n)
		}
		at = j
	}
	if err := os.Truncate(path, int64(at)); err != nil {
		return 0, err
	}
	return int64(len(data) - at), nil
}
