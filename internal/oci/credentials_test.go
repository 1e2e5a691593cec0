package oci

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dbfork/dbfork/internal/oci/ocitest"
	"github.com/dbfork/dbfork/internal/testenv"
)

// Registry credentials from the environment go to the hosts they are
// named for and nowhere else; over plain HTTP to a host not named for
// it, no credentials go at all.
func TestRegistryCredentialsStayWithTheirHost(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	reg := ocitest.Start(t, ocitest.Options{User: "ci", Password: "s3cret"})
	var mu sync.Mutex
	var got []string
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			mu.Lock()
			got = append(got, a)
			mu.Unlock()
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="sink"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer sink.Close()
	sinkHost := strings.TrimPrefix(sink.URL, "http://")
	key := strings.Repeat("ab", 32)
	files := map[string][]byte{"base/a": content(8, 5000)}
	src := artifactOf(t, files, layerBlob(t, tarEntry{path: "base/a", data: files["base/a"]}))
	named := Registry{Username: "ci", Password: "s3cret", CredentialHosts: []string{reg.Host}}
	pushSource(t, named, reg.Host+"/goldens/shop", key, src)

	s := unpackStore(t)
	for _, r := range []Registry{named, {Username: "ci", Password: "s3cret"}} {
		if _, err := Pull(ctx, s, sinkHost+"/goldens/shop:"+key, r, UnpackOptions{}); err == nil {
			t.Fatal("the sink served a golden")
		}
	}
	mu.Lock()
	if len(got) > 0 {
		t.Errorf("a host the credentials were not named for received %q", got)
	}
	mu.Unlock()
	if _, err := Pull(ctx, s, reg.Host+"/goldens/shop:"+key, named, UnpackOptions{}); err != nil {
		t.Fatalf("the named host: %v", err)
	}

	// Plain HTTP to a host that is not loopback: credentials only where
	// the host is named for plain HTTP too.
	far := "registry.example:5000"
	plain := Registry{PlainHTTP: true, Username: "ci", Password: "s3cret", CredentialHosts: []string{far}}
	sent := func(r Registry) bool {
		cred, err := r.credential(far)
		if err != nil {
			t.Fatal(err)
		}
		if cred == nil {
			return false
		}
		c, _ := cred(ctx, far)
		return c.Username != "" || c.Password != ""
	}
	if sent(plain) {
		t.Error("credentials would go in clear text to a host not named for plain HTTP")
	}
	plain.PlainHTTPHosts = []string{far}
	if !sent(plain) {
		t.Error("credentials are not sent to a host named for them and for plain HTTP")
	}
}

// An export file is not readable by other users.
func TestExportIsPrivate(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	files := map[string][]byte{"base/a": content(10, 5000)}
	s := unpackStore(t)
	res, err := Unpack(ctx, s, artifactOf(t, files, layerBlob(t, tarEntry{path: "base/a", data: files["base/a"]})), "x", UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(testenv.Dir(t), "export.tar")
	if _, err := Export(ctx, s, res.Golden, file, PackOptions{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("export file has mode %v, want it private", fi.Mode().Perm())
	}
}
