package access

import (
	"context"
	"crypto/tls"
	"net"
	"os"

	"github.com/redis/go-redis/v9"
)

// Config is what a connection to a pod's Redis needs. Configs are
// comparable: two equal Configs open equal connections, so a holder of
// long-lived connections (the prober) redials only when the Config
// changed. Build TLS once per change of what it holds, not per dial.
type Config struct {
	// Username is the ACL user to authenticate as; empty means the
	// default user (AUTH <password>).
	Username string
	// Password authenticates the connection; empty sends no AUTH.
	Password string
	// TLS, when set, is the client side of TLS every connection
	// speaks; nil means plaintext.
	TLS *tls.Config
}

// PasswordEnv is the environment variable a pod's container reads the
// cluster's password from (FromEnv).
const PasswordEnv = "REDIS_PASSWORD"

// FromEnv is the Config of a container the operator starts beside a
// cluster (the pre-check's seed): the password from $REDIS_PASSWORD.
func FromEnv() Config {
	return Config{Password: os.Getenv(PasswordEnv)}
}

// Dial opens a connection to addr (host:port) with d: TCP, then the TLS
// handshake when the Config has TLS, both bound by d's deadline and
// timeout. It sends no command: AuthCommand says what to send first.
func (c Config) Dial(ctx context.Context, d *net.Dialer, addr string) (net.Conn, error) {
	if c.TLS == nil {
		return d.DialContext(ctx, "tcp", addr)
	}
	td := tls.Dialer{NetDialer: d, Config: c.TLS}
	return td.DialContext(ctx, "tcp", addr)
}

// AuthCommand is the command that authenticates a new connection, nil
// when there is no password.
func (c Config) AuthCommand() []string {
	switch {
	case c.Password == "":
		return nil
	case c.Username != "":
		return []string{"AUTH", c.Username, c.Password}
	}
	return []string{"AUTH", c.Password}
}

// MigrateAuth is the part of a MIGRATE command that authenticates it on
// the target, nil when there is no password.
func (c Config) MigrateAuth() []string {
	switch {
	case c.Password == "":
		return nil
	case c.Username != "":
		return []string{"AUTH2", c.Username, c.Password}
	}
	return []string{"AUTH", c.Password}
}

// Options are go-redis options for addr (host:port) with the Config's
// credentials and TLS; the caller sets timeouts, retries and pool size.
func (c Config) Options(addr string) *redis.Options {
	return &redis.Options{Addr: addr, Username: c.Username, Password: c.Password, TLSConfig: c.TLS}
}
