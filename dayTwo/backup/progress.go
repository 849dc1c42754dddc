package backup

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cacheops/cacheops/dayTwo/access"
	"github.com/redis/go-redis/v9"
)

// DefaultStallTimeout is how long an attempt may make no progress before
// it is given up. Measured on the 2-core development machine under load
// (load average 6-8): a healthy disk-based SYNC sends its first byte after
// 0.03-0.12 s for 3,000 small keys, 0.6-1.0 s for 200,000 keys of 512
// bytes and 6.9-8.4 s for 2 million (1 GiB of memory): Redis writes the
// whole snapshot before it sends the first byte. While the source writes
// a snapshot it started for this attempt, its growing key count is
// progress too, so the timeout does not grow with the dataset; one minute
// leaves seven times the 1 GiB case for a source whose INFO says nothing,
// and bounds the wait behind a save or rewrite this attempt cannot use.
const DefaultStallTimeout = time.Minute

// SaveState is what INFO persistence says about a source's background
// work. A SYNC waits while a save it cannot attach to or an AOF rewrite
// runs.
type SaveState struct {
	// Saving: a background RDB save runs (rdb_bgsave_in_progress), for
	// SaveSeconds (rdb_current_bgsave_time_sec).
	Saving      bool
	SaveSeconds int64
	// KeysSaved of KeysTotal (current_save_keys_processed/_total, Redis
	// 7.0 and later; -1 when not reported).
	KeysSaved, KeysTotal int64
	// Rewriting: an AOF rewrite runs (aof_rewrite_in_progress).
	Rewriting bool
}

// Busy tells whether the source is writing a snapshot or rewriting its AOF.
func (s SaveState) Busy() bool { return s.Saving || s.Rewriting }

// String says what the source is busy with, for people: "a background
// save (1024 of 63000 keys written)", "an AOF rewrite", or "nothing".
func (s SaveState) String() string {
	var parts []string
	if s.Saving {
		p := "a background save"
		if s.KeysTotal > 0 {
			p += fmt.Sprintf(" (%d of %d keys written, for %ds)", s.KeysSaved, s.KeysTotal, s.SaveSeconds)
		}
		parts = append(parts, p)
	}
	if s.Rewriting {
		parts = append(parts, "an AOF rewrite")
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, " and ")
}

// ParseSaveState reads the fields of INFO persistence a SaveState needs.
func ParseSaveState(info string) SaveState {
	s := SaveState{KeysSaved: -1, KeysTotal: -1}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "rdb_bgsave_in_progress":
			s.Saving = v == "1"
		case "rdb_current_bgsave_time_sec":
			s.SaveSeconds = n
		case "current_save_keys_processed":
			s.KeysSaved = n
		case "current_save_keys_total":
			s.KeysTotal = n
		case "aof_rewrite_in_progress":
			s.Rewriting = v == "1"
		}
	}
	return s
}

// ReadSaveState asks a Redis for its SaveState.
func ReadSaveState(ctx context.Context, addr string, acc access.Config, timeout time.Duration) (SaveState, error) {
	o := acc.Options(addr)
	o.MaxRetries, o.PoolSize, o.DisableIdentity = -1, 1, true
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = timeout, timeout, timeout
	rc := redis.NewClient(o)
	defer rc.Close()
	info, err := rc.Info(ctx, "persistence").Result()
	if err != nil {
		return SaveState{}, err
	}
	return ParseSaveState(info), nil
}

// Progress is how far an attempt got.
type Progress struct {
	// Received bytes of the dump; Size is its length, -1 until the source
	// announced it (it does once the snapshot is written).
	Received, Size int64
	// Last is when the attempt last made progress: a byte received, or
	// the source's own snapshot growing.
	Last time.Time
	// Source is the source's SaveState as last read while waiting for
	// the snapshot.
	Source SaveState
}

// StallError: the attempt made no progress for Timeout.
type StallError struct {
	Addr     string
	Timeout  time.Duration
	Progress Progress
	// State is what the source was busy with when the attempt gave up;
	// StateErr why it could not be read.
	State    SaveState
	StateErr error
}

func (e *StallError) Error() string {
	return fmt.Sprintf("no progress for %s: %s", e.Timeout, e.Why(e.Addr))
}

// Why says why the source named name did not serve the snapshot.
func (e *StallError) Why(name string) string {
	switch {
	case e.Progress.Size >= 0:
		return fmt.Sprintf("%s stopped sending after %d of %d bytes", name, e.Progress.Received, e.Progress.Size)
	case e.StateErr != nil:
		return fmt.Sprintf("%s sent no snapshot, and INFO persistence failed: %v", name, e.StateErr)
	case e.State.Busy():
		return fmt.Sprintf("%s is busy with %s that this backup cannot use, and sent no snapshot", name, e.State)
	}
	return fmt.Sprintf("%s sent no snapshot and is not saving one", name)
}
