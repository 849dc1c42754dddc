package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cacheops/cacheops/dayTwo/access"
)

// infoCommand is INFO with the sections the planner reads, encoded once.
var infoCommand = encodeCommand("INFO", "server", "replication", "persistence", "keyspace", "memory")

// maxRedialPeriods caps the backoff between two connection attempts to a
// pod that keeps failing, in probe periods. Two periods halve the dials to
// pods that are down, while a pod that comes back is seen at most one
// period later than when every probe dialed.
const maxRedialPeriods = 2

// maxReply bounds a reply's length: a pod cannot make the operator
// allocate more than this for one answer.
const maxReply = 16 << 20

// conn is one persistent connection to one pod's Redis, used by one
// goroutine at a time. A command that fails or times out closes it; the
// next command dials again, no sooner than the backoff allows. It speaks
// just enough RESP2 for commands that answer a string (INFO, CLUSTER
// INFO, CLUSTER NODES), so every command sent costs one allocation: the
// answer.
type conn struct {
	ip, addr string
	access   access.Config
	nc       net.Conn
	r        *bufio.Reader
	// failures counts the commands that failed in a row; retryAt is
	// when the next dial may be tried.
	failures int
	retryAt  time.Time
}

func newConn(ip string, acc access.Config) *conn {
	return &conn{ip: ip, addr: net.JoinHostPort(ip, "6379"), access: acc}
}

// errBackoff: the pod failed the last attempts and the backoff has not
// passed; nothing was sent.
var errBackoff = errors.New("not reconnected yet after failed attempts")

// do sends one encoded command and returns its answer, as exchange does.
func (c *conn) do(ctx context.Context, cmd []byte, timeout, period time.Duration) (string, error) {
	var out [1]string
	cmds := [1][]byte{cmd}
	err := c.exchange(ctx, cmds[:], out[:], timeout, period)
	return out[0], err
}

// pipeline sends encoded commands in one write and returns their answers
// in order, as exchange does.
func (c *conn) pipeline(ctx context.Context, cmds [][]byte, timeout, period time.Duration) ([]string, error) {
	out := make([]string, len(cmds))
	if err := c.exchange(ctx, cmds, out, timeout, period); err != nil {
		return nil, err
	}
	return out, nil
}

// exchange sends encoded commands in one write and reads their answers
// into out, in order. Dialing (with the TLS handshake and AUTH), sending and reading all share
// one deadline, timeout from now, as a new connection per probe had: a
// frozen process times out alike on a connection that was open before it
// froze and on a new one.
func (c *conn) exchange(ctx context.Context, cmds [][]byte, out []string, timeout, period time.Duration) error {
	now := time.Now()
	deadline := now.Add(timeout)
	reused := c.nc != nil
	if !reused && now.Before(c.retryAt) {
		return fmt.Errorf("%w (%d)", errBackoff, c.failures)
	}
	err := c.send(ctx, cmds, out, deadline)
	var ne net.Error
	if err != nil && reused && !(errors.As(err, &ne) && ne.Timeout()) && time.Now().Before(deadline) {
		// The connection broke while idle (the server restarted or
		// closed it): a new dial sees what a probe on a new connection
		// would have seen.
		c.close()
		err = c.send(ctx, cmds, out, deadline)
	}
	if err != nil {
		c.failed(now, period)
		return err
	}
	c.failures = 0
	return nil
}

// send dials when there is no connection, then writes the commands and
// reads their answers, all before the deadline. An error reply does not
// stop the reading (the first one is returned); a broken connection does.
func (c *conn) send(ctx context.Context, cmds [][]byte, out []string, deadline time.Time) error {
	if c.nc == nil {
		if err := c.dial(ctx, deadline); err != nil {
			return err
		}
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		return err
	}
	buf := cmds[0]
	if len(cmds) > 1 {
		buf = slices.Concat(cmds...)
	}
	if _, err := c.nc.Write(buf); err != nil {
		return err
	}
	var first error
	for i := range cmds {
		r, err := readReply(c.r)
		if err != nil && !isErrorReply(err) {
			return err
		}
		if err != nil && first == nil {
			first = err
		}
		out[i] = r
	}
	return first
}

func (c *conn) dial(ctx context.Context, deadline time.Time) error {
	nc, err := c.access.Dial(ctx, &net.Dialer{Deadline: deadline, KeepAlive: -1}, c.addr)
	if err != nil {
		return err
	}
	c.nc = nc
	if c.r == nil {
		c.r = bufio.NewReaderSize(nc, 512)
	} else {
		c.r.Reset(nc)
	}
	auth := c.access.AuthCommand()
	if auth == nil {
		return nil
	}
	if err := nc.SetDeadline(deadline); err != nil {
		return err
	}
	if _, err := c.roundTrip(encodeCommand(auth...)); err != nil {
		return fmt.Errorf("AUTH: %w", err)
	}
	return nil
}

// failed closes the connection and pushes the next dial back: one period
// after the first failure, doubling up to maxRedialPeriods periods.
func (c *conn) failed(now time.Time, period time.Duration) {
	c.close()
	c.failures++
	wait := period
	for i := 1; i < c.failures && wait < maxRedialPeriods*period; i++ {
		wait *= 2
	}
	// The pod's next probe comes a period after this one started: allow
	// the dial a little early, so jitter never costs a whole period.
	c.retryAt = now.Add(min(wait, maxRedialPeriods*period) - period/2)
}

func (c *conn) close() {
	if c.nc != nil {
		_ = c.nc.Close()
		c.nc = nil
	}
}

func (c *conn) roundTrip(cmd []byte) (string, error) {
	if _, err := c.nc.Write(cmd); err != nil {
		return "", err
	}
	return readReply(c.r)
}

// replyError is an error reply of the server: the connection stays usable.
type replyError string

func (e replyError) Error() string { return "redis: " + string(e) }

func isErrorReply(err error) bool {
	var re replyError
	return errors.As(err, &re)
}

// maxArrayReply bounds an array reply: the probe reads only CONFIG GET's
// name and value.
const maxArrayReply = 16

// readReply reads one RESP2 reply that is a string: bulk, simple, or an
// integer (as text); an error reply is returned as an error. An array of
// such strings (CONFIG GET's name and value) is returned as its elements,
// each followed by a newline.
func readReply(r *bufio.Reader) (string, error) {
	return readItem(r, true)
}

// readItem is readReply; an array is read only when array is true (its
// elements are not arrays).
func readItem(r *bufio.Reader, array bool) (string, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return "", err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return "", fmt.Errorf("malformed reply line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', ':':
		return string(body), nil
	case '-':
		return "", replyError(body)
	case '$':
		n, ok := parseLength(body)
		if !ok || n > maxReply {
			return "", fmt.Errorf("malformed bulk length %q", body)
		}
		return readBulk(r, n)
	case '*':
		n, ok := parseLength(body)
		if !array || !ok || n > maxArrayReply {
			return "", fmt.Errorf("malformed array length %q", body)
		}
		var sb strings.Builder
		for range n {
			item, err := readItem(r, false)
			if err != nil {
				return "", err
			}
			sb.WriteString(item)
			sb.WriteByte('\n')
		}
		return sb.String(), nil
	}
	return "", fmt.Errorf("unexpected reply type %q", line[0])
}

// readBulk reads n bytes and the CRLF after them into one string, copying
// straight from the reader's buffer.
func readBulk(r *bufio.Reader, n int) (string, error) {
	var sb strings.Builder
	sb.Grow(n)
	for sb.Len() < n {
		want := min(n-sb.Len(), r.Size())
		chunk, err := r.Peek(want)
		if len(chunk) == 0 && err != nil {
			return "", err
		}
		sb.Write(chunk)
		_, _ = r.Discard(len(chunk))
	}
	cr, err := r.ReadByte()
	if err != nil {
		return "", err
	}
	lf, err := r.ReadByte()
	if err != nil {
		return "", err
	}
	if cr != '\r' || lf != '\n' {
		return "", errors.New("bulk reply not ended by CRLF")
	}
	return sb.String(), nil
}

// parseLength reads a bulk length: decimal digits, without allocating. A
// nil bulk (-1) is no string, hence not ok.
func parseLength(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	n := 0
	for _, d := range b {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int(d-'0')
	}
	return n, true
}

// encodeCommand encodes a command as a RESP array of bulk strings.
func encodeCommand(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}
