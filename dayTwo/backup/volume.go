package backup

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A PersistentVolumeClaim target is a folder on the claim. The pods of a
// restoring cluster read it where they mount it (NewDirStore); the operator,
// which mounts nothing, reads and writes it through the cluster's
// backup-store pod (NewRemoteStore), which serves the folder over HTTP with
// Handler.

// NewDirStore keeps dumps as files under root; name is how people see
// root, e.g. pvc://backups.
func NewDirStore(root, name string) *Store {
	return &Store{o: &dirObjects{root: root, name: name}}
}

var errInvalidKey = errors.New("invalid key")

type dirObjects struct {
	root, name string
}

// path maps a key to a file under root, refusing keys that leave it.
func (d *dirObjects) path(key string) (string, error) {
	clean := path.Clean("/" + key)
	if key == "" || clean != "/"+key || strings.Contains(clean, "/.") {
		return "", fmt.Errorf("%w %q: no empty, . or .. parts, and none starting with a dot", errInvalidKey, key)
	}
	return filepath.Join(d.root, filepath.FromSlash(clean)), nil
}

// put writes a hidden temporary file and renames it into place once all
// size bytes are on disk, so an interrupted upload never looks like a dump.
func (d *dirObjects) put(_ context.Context, key string, r io.Reader, size int64) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".partial-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, io.LimitReader(r, size))
	if err == nil && n != size {
		err = fmt.Errorf("the upload ended after %d of %d bytes", n, size)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return err
	}
	return syncDir(dir)
}

func (d *dirObjects) get(_ context.Context, key string) (io.ReadCloser, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: no file %s", ErrNotFound, p)
	}
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is not a file", ErrNotFound, p)
	}
	return f, nil
}

func (d *dirObjects) remove(_ context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if fi, err := os.Lstat(p); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a file", p)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (d *dirObjects) where(key string) string { return d.name + "/" + key }

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// StorePort is the port of the backup-store pod.
const StorePort = 7480

// Access limits what a backup-store pod serves.
type Access struct {
	// Token is the bearer token every request but /healthz carries.
	Token string
	// KeyPrefix: only keys under it are served (a cluster's own folder,
	// <prefix><namespace>/<cluster>/), so one cluster's password opens no
	// other cluster's dumps on a shared claim. Empty: the whole folder.
	KeyPrefix string
	// ReadOnly refuses PUT and DELETE (a store that only serves a restore).
	ReadOnly bool
}

// Handler serves a dir store: PUT, GET and DELETE /objects/<key>, each with
// "Authorization: Bearer <token>", and GET /healthz without. PUT needs a
// Content-Length; the file appears only when all of it arrived.
func Handler(s *Store, access Access, logf func(string, ...any)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	allowed := func(w http.ResponseWriter, r *http.Request, writes bool) bool {
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if access.Token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(access.Token)) != 1 {
			http.Error(w, "unauthorized: send the cluster's password as the bearer token", http.StatusUnauthorized)
			return false
		}
		if key := r.PathValue("key"); !strings.HasPrefix(key, access.KeyPrefix) {
			http.Error(w, fmt.Sprintf("forbidden: this store serves only keys under %q", access.KeyPrefix), http.StatusForbidden)
			return false
		}
		if writes && access.ReadOnly {
			http.Error(w, "forbidden: this store only serves a restore", http.StatusForbidden)
			return false
		}
		return true
	}
	status := func(err error) int {
		switch {
		case errors.Is(err, ErrNotFound):
			return http.StatusNotFound
		case errors.Is(err, errInvalidKey):
			return http.StatusBadRequest
		}
		return http.StatusInternalServerError
	}
	mux.HandleFunc("PUT /objects/{key...}", func(w http.ResponseWriter, r *http.Request) {
		if !allowed(w, r, true) {
			return
		}
		if r.ContentLength < 0 {
			http.Error(w, "Content-Length is required", http.StatusLengthRequired)
			return
		}
		key := r.PathValue("key")
		start := time.Now()
		if err := s.o.put(r.Context(), key, r.Body, r.ContentLength); err != nil {
			logf("PUT %s: %v", key, err)
			http.Error(w, err.Error(), status(err))
			return
		}
		logf("stored %s (%d bytes in %s)", key, r.ContentLength, time.Since(start).Round(time.Millisecond))
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("GET /objects/{key...}", func(w http.ResponseWriter, r *http.Request) {
		if !allowed(w, r, false) {
			return
		}
		f, err := s.o.get(r.Context(), r.PathValue("key"))
		if err != nil {
			http.Error(w, err.Error(), status(err))
			return
		}
		defer f.Close()
		if st, ok := f.(interface{ Stat() (os.FileInfo, error) }); ok {
			if fi, err := st.Stat(); err == nil {
				w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
			}
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.Copy(w, f)
	})
	mux.HandleFunc("DELETE /objects/{key...}", func(w http.ResponseWriter, r *http.Request) {
		if !allowed(w, r, true) {
			return
		}
		key := r.PathValue("key")
		if err := s.o.remove(r.Context(), key); err != nil {
			http.Error(w, err.Error(), status(err))
			return
		}
		logf("removed %s", key)
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// NewRemoteStore talks to a backup-store pod at addr (host:port) that
// serves claim; token is the cluster's password.
func NewRemoteStore(addr, token, claim string) *Store {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	// A pod that stops answering fails the attempt instead of holding the
	// backup forever.
	tr.ResponseHeaderTimeout = 2 * time.Minute
	return &Store{o: &remoteObjects{base: "http://" + addr + "/objects/", token: token, name: "pvc://" + claim, client: &http.Client{Transport: tr}}}
}

type remoteObjects struct {
	base, token, name string
	client            *http.Client
}

func (o *remoteObjects) do(ctx context.Context, method, key string, body io.Reader, size int64) (*http.Response, error) {
	u := o.base + (&url.URL{Path: key}).EscapedPath()
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
		if size == 0 {
			req.Body = http.NoBody
		}
	}
	req.Header.Set("Authorization", "Bearer "+o.token)
	resp, err := o.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the backup-store pod: %w", err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("the backup-store pod answered %s: %s", resp.Status, strings.TrimSpace(string(msg)))
		if resp.StatusCode == http.StatusNotFound {
			err = fmt.Errorf("%w: %v", ErrNotFound, err)
		}
		return nil, err
	}
	return resp, nil
}

func (o *remoteObjects) put(ctx context.Context, key string, r io.Reader, size int64) error {
	resp, err := o.do(ctx, http.MethodPut, key, r, size)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func (o *remoteObjects) get(ctx context.Context, key string) (io.ReadCloser, error) {
	resp, err := o.do(ctx, http.MethodGet, key, nil, 0)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

func (o *remoteObjects) remove(ctx context.Context, key string) error {
	resp, err := o.do(ctx, http.MethodDelete, key, nil, 0)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func (o *remoteObjects) where(key string) string { return o.name + "/" + key }
