package backup

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cacheops/cacheops/dayTwo/access"
)

// benchValue bytes of incompressible values, as many keys as make
// CACHEOPS_BENCH_BACKUP_MIB (default 1024): a dump of about 1 GiB.
const benchValue = 512

func benchKeys() int {
	mib := 1024
	if v, err := strconv.Atoi(os.Getenv("CACHEOPS_BENCH_BACKUP_MIB")); err == nil && v > 0 {
		mib = v
	}
	return mib << 20 / (benchValue + 32) // value plus key and RDB framing
}

// BenchmarkBackup streams a ~1 GiB dump. "baseline" is what Redis' own
// tool does, `redis-cli --rdb FILE`: the snapshot to a local file, no
// upload. "cacheops" is Take streaming it to a real S3 server (versitygw)
// with its checksum, and reports the operator's peak Go heap while doing
// so, the figure that shows the dump is never held in memory. "restore"
// is RestoreInto: the dump from the bucket into an empty data folder,
// checksum checked, as a restored pod's init container does.
//
// The server listens with TLS too: "baseline-tls" and "cacheops-tls" are
// the same two over TLS (spec.tls), from the same data in the same run,
// so their MiB_per_s beside the plaintext ones is the cost of TLS.
func BenchmarkBackup(b *testing.B) {
	ctx := context.Background()
	tlsArgs, tlsAddr, caFile, tlsCfg := tlsServerArgs(b)
	rc := redisServer(b, tlsArgs...)
	keys := benchKeys()
	pipe := rc.Pipeline()
	val := make([]byte, benchValue)
	for i := range keys {
		_, _ = rand.Read(val)
		pipe.Set(ctx, fmt.Sprintf("bench:%d", i), string(val), 0)
		if i%5000 == 4999 {
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		b.Fatal("redis-cli is needed (apt package redis-tools)")
	}
	host, port, _ := netSplit(rc.Options().Addr)

	b.Run("baseline", func(b *testing.B) {
		dir := b.TempDir()
		var size int64
		for i := 0; i < b.N; i++ {
			out := filepath.Join(dir, "dump.rdb")
			cmd := exec.Command(cli, "-h", host, "-p", port, "--no-auth-warning", "-a", "pw", "--rdb", out)
			if msg, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("redis-cli --rdb: %v: %s", err, msg)
			}
			st, err := os.Stat(out)
			if err != nil {
				b.Fatal(err)
			}
			size = st.Size()
		}
		b.ReportMetric(float64(size)/(1<<20), "dump_MiB")
		b.ReportMetric(float64(size)*float64(b.N)/(1<<20)/b.Elapsed().Seconds(), "MiB_per_s")
	})

	b.Run("baseline-tls", func(b *testing.B) {
		dir := b.TempDir()
		tlsHost, tlsPort, _ := netSplit(tlsAddr)
		var size int64
		for i := 0; i < b.N; i++ {
			out := filepath.Join(dir, "dump.rdb")
			cmd := exec.Command(cli, "--tls", "--cacert", caFile, "-h", tlsHost, "-p", tlsPort, "--no-auth-warning", "-a", "pw", "--rdb", out)
			if msg, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("redis-cli --tls --rdb: %v: %s", err, msg)
			}
			st, err := os.Stat(out)
			if err != nil {
				b.Fatal(err)
			}
			size = st.Size()
		}
		b.ReportMetric(float64(size)/(1<<20), "dump_MiB")
		b.ReportMetric(float64(size)*float64(b.N)/(1<<20)/b.Elapsed().Seconds(), "MiB_per_s")
	})

	takeToS3 := func(src Source) func(b *testing.B) {
		return func(b *testing.B) {
			st := s3(b)
			var size int64
			var peaks []float64
			for i := 0; i < b.N; i++ {
				runtime.GC()
				stop := sampleHeap()
				res, err := Take(ctx, src, func(ctx context.Context, r io.Reader, n int64) error {
					return st.Put(ctx, fmt.Sprintf("bench/%d.rdb", i), r, n)
				})
				peaks = append(peaks, stop())
				if err != nil {
					b.Fatal(err)
				}
				if res.Header.Keys != int64(keys) {
					b.Fatalf("the dump holds %d keys, want %d", res.Header.Keys, keys)
				}
				size = res.Size
			}
			sort.Float64s(peaks)
			b.ReportMetric(float64(size)/(1<<20), "dump_MiB")
			b.ReportMetric(float64(size)*float64(b.N)/(1<<20)/b.Elapsed().Seconds(), "MiB_per_s")
			b.ReportMetric(peaks[len(peaks)-1], "peak_heap_MiB")
		}
	}
	b.Run("cacheops", takeToS3(Source{Addr: rc.Options().Addr, Access: access.Config{Password: "pw"}}))
	b.Run("cacheops-tls", takeToS3(Source{Addr: tlsAddr, Access: access.Config{Password: "pw", TLS: tlsCfg}}))

	// A claim target: the operator's stream goes over HTTP to a
	// backup-store server (in this process, so the peak heap counts both)
	// that writes the folder.
	claim := b.TempDir()
	b.Run("cacheops-volume", func(b *testing.B) {
		srv := httptest.NewServer(Handler(NewDirStore(claim, "pvc://bench"), Access{Token: "pw"}, func(string, ...any) {}))
		defer srv.Close()
		st := NewRemoteStore(strings.TrimPrefix(srv.URL, "http://"), "pw", "bench")
		var size int64
		var peaks []float64
		for i := 0; i < b.N; i++ {
			runtime.GC()
			stop := sampleHeap()
			res, err := Take(ctx, Source{Addr: rc.Options().Addr, Access: access.Config{Password: "pw"}}, func(ctx context.Context, r io.Reader, n int64) error {
				return st.Put(ctx, "bench/volume.rdb", r, n)
			})
			peaks = append(peaks, stop())
			if err != nil {
				b.Fatal(err)
			}
			size = res.Size
			if i == b.N-1 {
				if err := st.PutMetadata(ctx, "bench/volume.rdb", Metadata{Keys: res.Header.Keys, Size: res.Size, Checksum: res.Checksum}); err != nil {
					b.Fatal(err)
				}
			}
		}
		sort.Float64s(peaks)
		b.ReportMetric(float64(size)/(1<<20), "dump_MiB")
		b.ReportMetric(float64(size)*float64(b.N)/(1<<20)/b.Elapsed().Seconds(), "MiB_per_s")
		b.ReportMetric(peaks[len(peaks)-1], "peak_heap_MiB")
	})

	// A restored pod's init container reading the mounted claim.
	b.Run("restore-volume", func(b *testing.B) {
		st := NewDirStore(claim, "pvc://bench")
		m, err := st.Metadata(ctx, "bench/volume.rdb")
		if err != nil {
			b.Skip("cacheops-volume did not run: ", err)
		}
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			dir := b.TempDir()
			b.StartTimer()
			if _, err := RestoreInto(ctx, st, "bench/volume.rdb", dir, "", func(string, ...any) {}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			_ = os.RemoveAll(dir)
			b.StartTimer()
		}
		b.ReportMetric(float64(m.Size)/(1<<20), "dump_MiB")
		b.ReportMetric(float64(m.Size)*float64(b.N)/(1<<20)/b.Elapsed().Seconds(), "MiB_per_s")
	})

	b.Run("restore", func(b *testing.B) {
		b.StopTimer()
		st := s3(b)
		const key = "bench/restore.rdb"
		res, err := Take(ctx, Source{Addr: rc.Options().Addr, Access: access.Config{Password: "pw"}}, func(ctx context.Context, r io.Reader, n int64) error {
			return st.Put(ctx, key, r, n)
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := st.PutMetadata(ctx, key, Metadata{Keys: res.Header.Keys, Size: res.Size, Checksum: res.Checksum}); err != nil {
			b.Fatal(err)
		}
		var elapsed time.Duration
		var peaks []float64
		for i := 0; i < b.N; i++ {
			dir := b.TempDir()
			runtime.GC()
			stop := sampleHeap()
			start := time.Now()
			b.StartTimer()
			_, err := RestoreInto(ctx, st, key, dir, "", func(string, ...any) {})
			b.StopTimer()
			elapsed += time.Since(start)
			peaks = append(peaks, stop())
			if err != nil {
				b.Fatal(err)
			}
			_ = os.RemoveAll(dir)
		}
		sort.Float64s(peaks)
		b.ReportMetric(float64(res.Size)/(1<<20), "dump_MiB")
		b.ReportMetric(float64(res.Size)*float64(b.N)/(1<<20)/elapsed.Seconds(), "MiB_per_s")
		b.ReportMetric(peaks[len(peaks)-1], "peak_heap_MiB")
	})
}

// sampleHeap samples the Go heap in use every 5 ms until the returned
// function is called, which gives the peak in MiB.
func sampleHeap() func() float64 {
	var mu sync.Mutex
	var peak uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			mu.Lock()
			peak = max(peak, m.HeapInuse)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() float64 {
		close(done)
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		return float64(peak) / (1 << 20)
	}
}
