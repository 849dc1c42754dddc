package backup

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cacheops/cacheops/dayTwo/access"
	"github.com/redis/go-redis/v9"
)

// redisServer starts a real redis-server in a temporary folder.
func redisServer(t testing.TB, args ...string) *redis.Client {
	t.Helper()
	return engineServer(t, "redis-server", args...)
}

// engineServer starts a real server program (redis-server, valkey-server)
// in a temporary folder.
func engineServer(t testing.TB, program string, args ...string) *redis.Client {
	t.Helper()
	return engineServerIn(t, program, t.TempDir(), args...)
}

// engineServerIn starts a real server program on the data folder dir.
func engineServerIn(t testing.TB, program, dir string, args ...string) *redis.Client {
	t.Helper()
	bin, err := exec.LookPath(program)
	if err != nil {
		t.Fatalf("%s is needed (make test installs it with hack/install-deps.sh): %v", program, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, append([]string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--requirepass", "pw"}, args...)...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	rc := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Password: "pw"})
	t.Cleanup(func() { rc.Close() })
	for i := 0; ; i++ {
		if rc.Ping(context.Background()).Err() == nil {
			return rc
		}
		if i > 100 {
			t.Fatalf("%s did not answer", program)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTakeStreamsAConsistentDump(t *testing.T) {
	ctx := context.Background()
	rc := redisServer(t)
	for i := range 1000 {
		if err := rc.Set(ctx, fmt.Sprintf("key:%d", i), bytes.Repeat([]byte{'v'}, 100), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		rc.Expire(ctx, fmt.Sprintf("key:%d", i), time.Hour)
	}
	var got bytes.Buffer
	res, err := Take(ctx, Source{Addr: rc.Options().Addr, Access: access.Config{Password: "pw"}}, func(_ context.Context, r io.Reader, size int64) error {
		n, err := io.Copy(&got, r)
		if err == nil && n != size {
			err = fmt.Errorf("copied %d of %d", n, size)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Header.Keys != 1000 || res.Header.ExpiringKeys != 10 || res.Header.DB != 0 {
		t.Errorf("header %+v: want 1000 keys, 10 expiring, db 0", res.Header)
	}
	if res.Header.RedisVersion == "" || res.Size != int64(got.Len()) {
		t.Errorf("result %+v for %d bytes", res, got.Len())
	}

	// The dump loads into a fresh server, as appendonly.aof too.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "appendonly.aof"), got.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded := redisServer(t, "--dir", dir, "--appendonly", "yes", "--appenddirname", "appendonly")
	if n := loaded.DBSize(ctx).Val(); n != 1000 {
		t.Errorf("the restored server holds %d keys, want 1000", n)
	}
}

func TestTakeFailsOnABadPassword(t *testing.T) {
	rc := redisServer(t)
	_, err := Take(context.Background(), Source{Addr: rc.Options().Addr, Access: access.Config{Password: "wrong"}}, func(context.Context, io.Reader, int64) error { return nil })
	if err == nil {
		t.Fatal("a wrong password must fail the backup")
	}
}

func TestTakeStopsWhenCancelled(t *testing.T) {
	rc := redisServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Take(ctx, Source{Addr: rc.Options().Addr, Access: access.Config{Password: "pw"}}, func(ctx context.Context, r io.Reader, size int64) error {
		cancel()
		_, err := io.Copy(io.Discard, r)
		if err == nil {
			return ctx.Err()
		}
		return err
	})
	if err == nil {
		t.Fatal("a cancelled backup must fail")
	}
}

func TestParseHeaderEmptyAndShort(t *testing.T) {
	if _, err := ParseHeader([]byte("REDIS0010\xfa\x09redis-ver")); err != errShort {
		t.Errorf("a cut header: %v, want errShort", err)
	}
	if _, err := ParseHeader([]byte("NOTREDIS!")); err == nil {
		t.Error("a file that is no RDB must be refused")
	}
	h, err := ParseHeader([]byte("REDIS0010\xfa\x09redis-ver\x067.0.15\xff"))
	if err != nil || h.Keys != 0 || h.RedisVersion != "7.0.15" {
		t.Errorf("empty dump: %+v, %v", h, err)
	}
}

func TestLZF(t *testing.T) {
	// "aaaaaaaaaa": literal "a", then a back reference of 9 at distance 1.
	out, err := lzfDecompress([]byte{0x00, 'a', 0xE0, 0x00, 0x00}, 10)
	if err != nil || string(out) != "aaaaaaaaaa" {
		t.Errorf("got %q, %v", out, err)
	}
}

func netSplit(addr string) (string, string, error) { return net.SplitHostPort(addr) }

// A dump streamed from each engine version installed here carries that
// version's RDB format, as the engine table says (docs/engines.md), and
// its header is read whole.
func TestTakeReadsTheRDBVersionOfEachEngine(t *testing.T) {
	for _, c := range []struct {
		program string
		rdb     int
	}{{"redis-server", 10}, {"valkey-server", 11}} {
		t.Run(c.program, func(t *testing.T) {
			ctx := context.Background()
			rc := engineServer(t, c.program)
			for i := range 100 {
				if err := rc.Set(ctx, fmt.Sprintf("key:%d", i), "v", 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			res, err := Take(ctx, Source{Addr: rc.Options().Addr, Access: access.Config{Password: "pw"}}, func(_ context.Context, r io.Reader, _ int64) error {
				_, err := io.Copy(io.Discard, r)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.HeaderErr != nil || res.Header.RDBVersion != c.rdb || res.Header.Keys != 100 {
				t.Errorf("%s: header %+v (%v), want RDB version %d and 100 keys", c.program, res.Header, res.HeaderErr, c.rdb)
			}
		})
	}
}
