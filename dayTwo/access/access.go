package access

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/cacheops/cacheops/renderer/certificates"
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

// The environment of a container the operator starts beside a cluster
// (the pre-check's seed, renderer.RenderPrecheck), read by FromEnv: the
// cluster's password and, with TLS, the CA bundle file and the name the
// server certificate must carry.
const (
	PasswordEnv      = "REDIS_PASSWORD"
	UsernameEnv      = "REDIS_USERNAME"
	TLSCAFileEnv     = "REDIS_TLS_CA_FILE"
	TLSServerNameEnv = "REDIS_TLS_SERVER_NAME"
)

// FromEnv is the Config of a container the operator starts beside a
// cluster: the user from $REDIS_USERNAME (the default user when unset),
// the password from $REDIS_PASSWORD, and TLS checked against
// the CAs in $REDIS_TLS_CA_FILE for the name $REDIS_TLS_SERVER_NAME when
// that file is named.
func FromEnv() (Config, error) {
	c := Config{Username: os.Getenv(UsernameEnv), Password: os.Getenv(PasswordEnv)}
	file := os.Getenv(TLSCAFileEnv)
	if file == "" {
		return c, nil
	}
	bundle, err := os.ReadFile(file)
	if err != nil {
		return c, fmt.Errorf("$%s: %w", TLSCAFileEnv, err)
	}
	c.TLS, err = ClientTLS(bundle, os.Getenv(TLSServerNameEnv))
	if err != nil {
		return c, fmt.Errorf("$%s %s: %w", TLSCAFileEnv, file, err)
	}
	return c, nil
}

// ClientTLS is the client side of TLS to a cluster's pods: the server's
// certificate must chain to a CA of bundle (PEM) and carry serverName.
// An empty bundle means the system's CAs (a public issuer).
func ClientTLS(bundle []byte, serverName string) (*tls.Config, error) {
	if serverName == "" {
		return nil, errors.New("no server name to check the certificate against")
	}
	cfg := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
	if len(bundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(bundle) {
			return nil, errors.New("no PEM certificate in the CA bundle")
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// PeerSerial is the serial number (hex) of the certificate the server
// presented on conn, "" when conn is not TLS.
func PeerSerial(conn net.Conn) string {
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return ""
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return ""
	}
	return certificates.SerialHex(certs[0])
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
