// Package ocitest runs a real OCI registry (CNCF distribution, filesystem
// storage) inside a test process, on 127.0.0.1.
package ocitest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/bcrypt"

	// The storage driver and auth scheme the registry is configured with.
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

// Registry is a running registry.
type Registry struct {
	Host string // 127.0.0.1:PORT
	Root string // its storage directory
}

// Options configure a registry.
type Options struct {
	User, Password string // set: htpasswd auth with this one user
}

// Start runs a registry until the test ends.
func Start(t testing.TB, o Options) *Registry {
	t.Helper()
	r, stop, err := Serve(t.TempDir(), "127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return r
}

// Serve runs a registry storing under root on addr until stop is called
// (for benchmarks, outside tests).
func Serve(root, addr string, o Options) (*Registry, func(), error) {
	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{
		"filesystem": configuration.Parameters{"rootdirectory": filepath.Join(root, "data")},
		"delete":     configuration.Parameters{"enabled": true},
	}
	cfg.HTTP.Secret = "dbfork-test"
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	if o.User != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(o.Password), bcrypt.MinCost)
		if err != nil {
			return nil, nil, err
		}
		pw := filepath.Join(root, "htpasswd")
		if err := os.WriteFile(pw, []byte(o.User+":"+string(hash)+"\n"), 0o600); err != nil {
			return nil, nil, err
		}
		cfg.Auth = configuration.Auth{"htpasswd": configuration.Parameters{"realm": "dbfork-test", "path": pw}}
	}
	// The registry logs every request through logrus; tests read our errors.
	logrus.SetOutput(io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	app := handlers.NewApp(ctx, cfg)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	srv := &http.Server{Handler: app}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "registry:", err)
		}
	}()
	stop := func() {
		srv.Close()
		cancel()
	}
	return &Registry{Host: ln.Addr().String(), Root: filepath.Join(root, "data")}, stop, nil
}

// BlobPath is where the registry stores a blob ("sha256:…").
func (r *Registry) BlobPath(digest string) string {
	algo, hex, _ := strings.Cut(digest, ":")
	return filepath.Join(r.Root, "docker", "registry", "v2", "blobs", algo, hex[:2], hex, "data")
}
