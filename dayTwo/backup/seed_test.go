package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cacheops/cacheops/dayTwo/access"
)

// A seed copies a real server's data into an empty folder, where a real
// server of the other engine starts on it with appendonly on and holds the
// same keys; the report round-trips. A folder that holds anything is
// refused.
func TestSeedIntoAnEmptyFolderLoadsInTheNewVersion(t *testing.T) {
	ctx := context.Background()
	src := redisServer(t)
	for i := range 500 {
		if err := src.Set(ctx, fmt.Sprintf("key:%d", i), "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	src.Expire(ctx, "key:1", time.Hour)
	dir := t.TempDir()
	res, err := Seed(ctx, Source{Addr: src.Options().Addr, Access: access.Config{Password: "pw"}}, dir)
	if err != nil {
		t.Fatal(err)
	}
	rep := SeedReportOf(res, src.Options().Addr)
	if rep.Keys != 500 || rep.ExpiringKeys != 1 || rep.DB != 0 || rep.RDBVersion != 10 {
		t.Fatalf("report %+v", rep)
	}
	back, err := ParseSeedReport(rep.Format())
	if err != nil || back != rep {
		t.Fatalf("parsed %+v, %v; want %+v", back, err, rep)
	}
	for _, f := range []string{"dump.rdb", "appendonly.aof"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	// valkey-server on the folder, as the pre-check pod runs it.
	loaded := engineServerIn(t, "valkey-server", dir, "--appendonly", "yes", "--appenddirname", "appendonlydir")
	if n, err := loaded.DBSize(ctx).Result(); err != nil || n != 500 {
		t.Fatalf("valkey-server holds %d keys (%v), want 500", n, err)
	}

	if _, err := Seed(ctx, Source{Addr: src.Options().Addr, Access: access.Config{Password: "pw"}}, dir); err == nil {
		t.Fatal("a seed into a folder that holds data was not refused")
	}
	if _, err := ParseSeedReport("keys=1"); err == nil {
		t.Fatal("a report without its fields was accepted")
	}
}
