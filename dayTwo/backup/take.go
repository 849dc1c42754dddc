package backup

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Source is the Redis a dump is taken from.
type Source struct {
	Addr     string // host:port
	Password string
	// Timeout bounds each wait for the source: the connection, and the
	// silences while it forks and writes the snapshot (it sends a newline
	// every second meanwhile).
	Timeout time.Duration
}

// Result describes a dump that was stored.
type Result struct {
	Header   Header
	Size     int64
	Checksum string // sha256:<hex>
	// HeaderErr says why Header is incomplete (Keys is -1 then).
	HeaderErr error
}

// headerBytes is how much of a dump's start is kept to read its header.
const headerBytes = 1 << 20

// Take asks the source for a snapshot (SYNC, as a replica would) and
// streams it to put as it arrives. Cancelling ctx closes the connection and
// fails the upload.
func Take(ctx context.Context, src Source, put func(ctx context.Context, r io.Reader, size int64) error) (Result, error) {
	var res Result
	timeout := src.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", src.Addr)
	if err != nil {
		return res, fmt.Errorf("connecting to %s: %w", src.Addr, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()

	br := bufio.NewReaderSize(conn, 64<<10)
	deadline := func() { _ = conn.SetDeadline(time.Now().Add(timeout)) }
	command := func(args ...string) (string, error) {
		deadline()
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := io.WriteString(conn, b.String()); err != nil {
			return "", err
		}
		line, err := br.ReadString('\n')
		return strings.TrimRight(line, "\r\n"), err
	}
	if src.Password != "" {
		reply, err := command("AUTH", src.Password)
		if err != nil {
			return res, fmt.Errorf("AUTH on %s: %w", src.Addr, err)
		}
		if !strings.HasPrefix(reply, "+") {
			return res, fmt.Errorf("AUTH on %s: %s", src.Addr, strings.TrimPrefix(reply, "-"))
		}
	}
	// Only the snapshot, no command stream after it (Redis 7); older
	// servers refuse the option and stream commands we never read.
	if _, err := command("REPLCONF", "rdb-only", "1"); err != nil {
		return res, fmt.Errorf("REPLCONF on %s: %w", src.Addr, err)
	}
	deadline()
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nSYNC\r\n"); err != nil {
		return res, fmt.Errorf("SYNC on %s: %w", src.Addr, err)
	}
	// Newlines keep the connection alive while the source forks; then
	// $<size>, or an error.
	var size int64
	for {
		deadline()
		line, err := br.ReadString('\n')
		if err != nil {
			return res, fmt.Errorf("waiting for the snapshot of %s: %w", src.Addr, err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "-") {
			return res, fmt.Errorf("SYNC on %s: %s", src.Addr, line[1:])
		}
		if !strings.HasPrefix(line, "$") || strings.HasPrefix(line, "$EOF:") {
			return res, fmt.Errorf("SYNC on %s: unexpected reply %q", src.Addr, line)
		}
		size, err = strconv.ParseInt(line[1:], 10, 64)
		if err != nil || size < 0 {
			return res, fmt.Errorf("SYNC on %s: bad size %q", src.Addr, line)
		}
		break
	}

	hash := sha256.New()
	head := &prefix{max: headerBytes}
	body := io.TeeReader(&deadlineReader{r: io.LimitReader(br, size), arm: deadline}, io.MultiWriter(hash, head))
	counted := &countingReader{r: body}
	if err := put(ctx, counted, size); err != nil {
		if ctx.Err() != nil {
			return res, fmt.Errorf("aborted: %w", context.Cause(ctx))
		}
		return res, err
	}
	if counted.n != size {
		return res, fmt.Errorf("the snapshot of %s ended after %d of %d bytes", src.Addr, counted.n, size)
	}
	res = Result{Size: size, Checksum: "sha256:" + hex.EncodeToString(hash.Sum(nil))}
	// The dump is stored either way; a header this reader does not know
	// (a module's data before the keys) only leaves the counts unknown.
	if res.Header, err = ParseHeader(head.b); err != nil {
		res.HeaderErr = err
		res.Header.Keys, res.Header.ExpiringKeys = -1, -1
	}
	return res, nil
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
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}
