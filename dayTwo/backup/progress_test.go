package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cacheops/cacheops/dayTwo/access"
	"github.com/redis/go-redis/v9"
)

// fill writes n small keys.
func fill(t *testing.T, rc *redis.Client, n int) {
	t.Helper()
	ctx := context.Background()
	pipe := rc.Pipeline()
	for i := range n {
		pipe.Set(ctx, fmt.Sprintf("key:%d", i), i, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

func discard(_ context.Context, r io.Reader, _ int64) error {
	_, err := io.Copy(io.Discard, r)
	return err
}

// A source busy with a save it started before the SYNC cannot serve it
// ("Can't attach the replica to the current BGSAVE"): the attempt gives up
// after the stall timeout and says what the source is busy with.
func TestTakeGivesUpOnASourceBusyWithAnotherSave(t *testing.T) {
	ctx := context.Background()
	rc := redisServer(t)
	fill(t, rc, 2000)
	// 5 ms per key: the save takes 10 s; the delay is the child's, so
	// setting it back does not shorten it.
	rc.ConfigSet(ctx, "rdb-key-save-delay", "5000")
	if err := rc.BgSave(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rc.ConfigSet(ctx, "rdb-key-save-delay", "0")
	time.Sleep(2100 * time.Millisecond) // rdb_current_bgsave_time_sec counts whole seconds

	start := time.Now()
	_, err := Take(ctx, Source{Addr: rc.Options().Addr, Access: access.Config{Password: "pw"}, StallTimeout: 2 * time.Second}, discard)
	took := time.Since(start)
	var se *StallError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a StallError", err)
	}
	if took < 2*time.Second || took > 6*time.Second {
		t.Errorf("gave up after %s, want about the 2 s stall timeout", took)
	}
	why := se.Why("basic-1")
	if !strings.Contains(why, "basic-1 is busy with a background save") || !strings.Contains(why, "of 2000 keys written") {
		t.Errorf("why: %q", why)
	}
	if se.Progress.Received != 0 || se.Progress.Size != -1 {
		t.Errorf("progress %+v: nothing was received", se.Progress)
	}
	t.Logf("%v (after %s)", err, took.Round(time.Millisecond))
}

// A source busy with an AOF rewrite delays the SYNC's save: no progress.
func TestTakeGivesUpOnASourceRewritingItsAOF(t *testing.T) {
	ctx := context.Background()
	rc := redisServer(t, "--appendonly", "yes")
	fill(t, rc, 2000)
	rc.ConfigSet(ctx, "rdb-key-save-delay", "5000") // the rewrite's RDB preamble is slowed too
	if err := rc.BgRewriteAOF(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rc.ConfigSet(ctx, "rdb-key-save-delay", "0")
	_, err := Take(ctx, Source{Addr: rc.Options().Addr, Access: access.Config{Password: "pw"}, StallTimeout: 2 * time.Second}, discard)
	var se *StallError
	if !errors.As(err, &se) || !strings.Contains(se.Why("basic-2"), "basic-2 is busy with an AOF rewrite") {
		t.Fatalf("got %v, want a StallError naming the AOF rewrite", err)
	}
}

// A slow save of the attempt's own snapshot is progress, however long it
// takes before the first byte: here 6 s with a 3 s stall timeout.
func TestTakeWaitsForItsOwnSlowSnapshot(t *testing.T) {
	ctx := context.Background()
	rc := redisServer(t)
	fill(t, rc, 6000)
	rc.ConfigSet(ctx, "rdb-key-save-delay", "1000")
	var mu sync.Mutex
	var seen []Progress
	start := time.Now()
	res, err := Take(ctx, Source{Addr: rc.Options().Addr, Access: access.Config{Password: "pw"}, StallTimeout: 3 * time.Second, OnProgress: func(p Progress) {
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
	}}, discard)
	if err != nil {
		t.Fatalf("after %s: %v", time.Since(start), err)
	}
	if res.Header.Keys != 6000 {
		t.Errorf("keys %d, want 6000", res.Header.Keys)
	}
	mu.Lock()
	defer mu.Unlock()
	var saving bool
	for _, p := range seen {
		saving = saving || (p.Size < 0 && p.Source.Saving && p.Source.KeysSaved > 0)
	}
	if !saving {
		t.Errorf("no progress report showed the source writing the snapshot: %+v", seen)
	}
	t.Logf("took %s with %d progress reports", time.Since(start).Round(time.Millisecond), len(seen))
}

// A put that stops reading stalls the attempt too.
func TestTakeGivesUpOnAStalledUpload(t *testing.T) {
	rc := redisServer(t)
	fill(t, rc, 1000)
	_, err := Take(context.Background(), Source{Addr: rc.Options().Addr, Access: access.Config{Password: "pw"}, StallTimeout: time.Second}, func(ctx context.Context, r io.Reader, _ int64) error {
		<-ctx.Done()
		return ctx.Err()
	})
	var se *StallError
	if !errors.As(err, &se) || se.Progress.Size <= 0 || !strings.Contains(se.Why("basic-1"), "stopped sending after 0 of") {
		t.Fatalf("got %v, want a StallError after the size arrived", err)
	}
}

func TestParseSaveState(t *testing.T) {
	st := ParseSaveState("# Persistence\r\nloading:0\r\ncurrent_save_keys_processed:429057\r\ncurrent_save_keys_total:2000000\r\nrdb_bgsave_in_progress:1\r\nrdb_current_bgsave_time_sec:2\r\naof_rewrite_in_progress:0\r\n")
	want := SaveState{Saving: true, SaveSeconds: 2, KeysSaved: 429057, KeysTotal: 2000000}
	if st != want {
		t.Errorf("got %+v, want %+v", st, want)
	}
	if got := st.String(); got != "a background save (429057 of 2000000 keys written, for 2s)" {
		t.Errorf("String: %q", got)
	}
	if old := ParseSaveState("aof_rewrite_in_progress:1\r\n"); !old.Busy() || old.KeysSaved != -1 || old.String() != "an AOF rewrite" {
		t.Errorf("an older server: %+v %q", old, old.String())
	}
}
