package backup

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cacheops/cacheops/dayTwo/access"
)

// Source is the Redis a dump is taken from.
type Source struct {
	Addr string // host:port
	// Access is how to connect and authenticate.
	Access access.Config
	// Timeout bounds each wait for the source: the connection, and the
	// silences while it forks and writes the snapshot (it sends a newline
	// every second meanwhile).
	Timeout time.Duration
	// StallTimeout bounds the time without progress: no byte of the dump
	// received and, while the source has not sent the snapshot yet, no
	// key more written by a save it started after this SYNC (a newline
	// every second is no progress: a source waiting for another save or
	// an AOF rewrite to end sends them too). Zero means
	// DefaultStallTimeout. The attempt then fails with a *StallError.
	StallTimeout time.Duration
	// OnProgress, when set, is called about once a second (from another
	// goroutine) with the attempt's progress.
	OnProgress func(Progress)
}

// Result describes a dump that was stored.
type Result struct {
	Header   Header
	Size     int64
	Checksum string // sha256:<hex>
	// HeaderErr says why Header is incomplete (Keys is -1 then).
	HeaderErr error
}

// Metadata is what a stored dump's metadata says of it: the facts of the
// dump, taken from source between start and end. Who it belongs to
// (Cluster, Namespace, Backup) and a shard's place are the caller's.
func (r Result) Metadata(source string, start, end time.Time) Metadata {
	h := r.Header
	return Metadata{SourcePod: source, RedisVersion: h.RedisVersion, RDBVersion: h.RDBVersion, ReplicationOffset: h.ReplicationOffset,
		DB: h.DB, Keys: h.Keys, ExpiringKeys: h.ExpiringKeys, Size: r.Size, Checksum: r.Checksum, StartTime: start.UTC(), EndTime: end.UTC()}
}

// headerBytes is how much of a dump's start is kept to read its header.
const headerBytes = 1 << 20

// Take asks the source for a snapshot (SYNC, as a replica would) and
// streams it to put as it arrives. Cancelling ctx closes the connection and
// fails the upload.
func Take(ctx context.Context, src Source, put func(ctx context.Context, r io.Reader, size int64) error) (Result, error) {
	timeout := src.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	conn, err := src.Access.Dial(ctx, &net.Dialer{Timeout: timeout}, src.Addr)
	if err != nil {
		return Result{}, fmt.Errorf("connecting to %s: %w", src.Addr, err)
	}
	defer conn.Close()
	// The watchdog cancels run when the attempt stalls; the outer ctx is
	// the caller's (a failover, the operator stopping).
	run, giveUp := context.WithCancelCause(ctx)
	defer giveUp(nil)
	stop := context.AfterFunc(run, func() { _ = conn.Close() })
	defer stop()
	stalled := func(err error) error {
		var se *StallError
		if ctx.Err() == nil && errors.As(context.Cause(run), &se) {
			return se
		}
		return err
	}

	c := &syncConn{conn: conn, br: bufio.NewReaderSize(conn, 64<<10), timeout: timeout, addr: src.Addr}
	if err := c.sync(src.Access); err != nil {
		return Result{}, err
	}
	w := &watchdog{src: src, syncAt: time.Now(), giveUp: giveUp}
	w.size.Store(-1)
	watched := make(chan struct{})
	go func() { defer close(watched); w.run(run) }()
	defer func() { <-watched }()
	defer giveUp(nil)
	size, err := c.snapshotSize(stalled)
	if err != nil {
		return Result{}, err
	}
	w.size.Store(size)

	hash := sha256.New()
	head := &prefix{max: headerBytes}
	body := io.TeeReader(&deadlineReader{r: io.LimitReader(c.br, size), arm: c.deadline}, io.MultiWriter(hash, head))
	counted := &countingReader{r: body, n: &w.received}
	if err := put(run, counted, size); err != nil {
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("aborted: %w", context.Cause(ctx))
		}
		return Result{}, stalled(err)
	}
	if n := counted.n.Load(); n != size {
		return Result{}, stalled(fmt.Errorf("the snapshot of %s ended after %d of %d bytes", src.Addr, n, size))
	}
	res := Result{Size: size, Checksum: "sha256:" + hex.EncodeToString(hash.Sum(nil))}
	// The dump is stored either way; a header this reader does not know
	// (a module's data before the keys) only leaves the counts unknown.
	if res.Header, err = ParseHeader(head.b); err != nil {
		res.HeaderErr = err
		res.Header.Keys, res.Header.ExpiringKeys = -1, -1
	}
	return res, nil
}

// syncConn is the replication connection a dump is read from.
type syncConn struct {
	conn    net.Conn
	br      *bufio.Reader
	timeout time.Duration
	addr    string
}

func (c *syncConn) deadline() { _ = c.conn.SetDeadline(time.Now().Add(c.timeout)) }

// command sends one command and reads its one-line reply.
func (c *syncConn) command(args ...string) (string, error) {
	c.deadline()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c.conn, b.String()); err != nil {
		return "", err
	}
	line, err := c.br.ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

// sync authenticates and asks for the snapshot.
func (c *syncConn) sync(acc access.Config) error {
	if auth := acc.AuthCommand(); auth != nil {
		reply, err := c.command(auth...)
		if err != nil {
			return fmt.Errorf("AUTH on %s: %w", c.addr, err)
		}
		if !strings.HasPrefix(reply, "+") {
			return fmt.Errorf("AUTH on %s: %s", c.addr, strings.TrimPrefix(reply, "-"))
		}
	}
	// Only the snapshot, no command stream after it (Redis 7); older
	// servers refuse the option and stream commands we never read.
	if _, err := c.command("REPLCONF", "rdb-only", "1"); err != nil {
		return fmt.Errorf("REPLCONF on %s: %w", c.addr, err)
	}
	c.deadline()
	if _, err := io.WriteString(c.conn, "*1\r\n$4\r\nSYNC\r\n"); err != nil {
		return fmt.Errorf("SYNC on %s: %w", c.addr, err)
	}
	return nil
}

// snapshotSize reads the $<size> that starts the snapshot, past the
// newlines that keep the connection alive while the source forks; a
// failed read is judged by stalled (the watchdog may have cut it).
func (c *syncConn) snapshotSize(stalled func(error) error) (int64, error) {
	for {
		c.deadline()
		line, err := c.br.ReadString('\n')
		if err != nil {
			return 0, stalled(fmt.Errorf("waiting for the snapshot of %s: %w", c.addr, err))
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "-"):
			return 0, fmt.Errorf("SYNC on %s: %s", c.addr, line[1:])
		case !strings.HasPrefix(line, "$") || strings.HasPrefix(line, "$EOF:"):
			return 0, fmt.Errorf("SYNC on %s: unexpected reply %q", c.addr, line)
		}
		size, err := strconv.ParseInt(line[1:], 10, 64)
		if err != nil || size < 0 {
			return 0, fmt.Errorf("SYNC on %s: bad size %q", c.addr, line)
		}
		return size, nil
	}
}

// prefix keeps the first max bytes written to it.
type prefix struct {
	b   []byte
	max int
}

func (p *prefix) Write(b []byte) (int, error) {
	if room := p.max - len(p.b); room > 0 {
		p.b = append(p.b, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

// deadlineReader renews the connection deadline before each read, so only
// a silent source times out, not a long transfer.
type deadlineReader struct {
	r   io.Reader
	arm func()
}

func (d *deadlineReader) Read(b []byte) (int, error) {
	d.arm()
	return d.r.Read(b)
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// watchdog gives an attempt up when it makes no progress for the stall
// timeout, and reports its progress.
type watchdog struct {
	src            Source
	syncAt         time.Time
	giveUp         context.CancelCauseFunc
	received, size atomic.Int64
}

func (w *watchdog) run(ctx context.Context) {
	limit := w.src.StallTimeout
	if limit <= 0 {
		limit = DefaultStallTimeout
	}
	every := min(max(limit/10, 50*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	p := Progress{Size: -1, Last: w.syncAt}
	var lastKeys int64 = -1
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if r := w.received.Load(); r != p.Received {
			p.Received, p.Last = r, now
		}
		p.Size = w.size.Load()
		if p.Size < 0 {
			// Redis writes the whole snapshot before it sends a byte: a
			// save that started after this SYNC is this attempt's (or one
			// it attached to), and each key it writes is progress. A save
			// that was running before, or an AOF rewrite, is not.
			st, err := ReadSaveState(ctx, w.src.Addr, w.src.Access, every)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				p.Source = st
				ours := st.Saving && time.Duration(st.SaveSeconds)*time.Second <= now.Sub(w.syncAt)+time.Second
				if ours && st.KeysSaved >= 0 && st.KeysSaved != lastKeys {
					lastKeys, p.Last = st.KeysSaved, now
				}
			}
		}
		if w.src.OnProgress != nil {
			w.src.OnProgress(p)
		}
		if now.Sub(p.Last) >= limit {
			se := &StallError{Addr: w.src.Addr, Timeout: limit, Progress: p}
			if p.Size < 0 {
				se.State, se.StateErr = ReadSaveState(ctx, w.src.Addr, w.src.Access, every*2)
			}
			w.giveUp(se)
			return
		}
	}
}
