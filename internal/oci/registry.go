package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"oras.land/oras-go/v2/registry/remote/retry"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/store"
)

// Registry says how to reach registries. The CLI fills it from flags and
// the environment.
type Registry struct {
	// PlainHTTP talks HTTP to every registry; without it only loopback
	// registries (localhost, 127.0.0.0/8, ::1) and PlainHTTPHosts are
	// reached over HTTP.
	PlainHTTP bool
	// PlainHTTPHosts are registries (host[:port] as written in
	// references) reached over plain HTTP that may still be sent
	// credentials: naming one is saying its network may see them.
	PlainHTTPHosts []string
	// Username and Password are sent to the CredentialHosts only, never
	// to a registry a reference (a recipe's [cache]) merely names.
	Username, Password string
	CredentialHosts    []string
	// DockerConfig is the docker config.json whose per-host auths and
	// credential helpers are used otherwise ("" or a missing file:
	// anonymous).
	DockerConfig string
}

// repository opens "registry/repo[:tag|@digest]" and returns it with the
// tag or digest (may be empty).
func (r Registry) repository(ref string) (*remote.Repository, string, error) {
	parsed, err := registry.ParseReference(ref)
	if err != nil {
		return nil, "", errs.Invalid("%q is not a registry reference (write it as registry/repository[:tag|@sha256:…], e.g. 127.0.0.1:5000/goldens/shop)", ref)
	}
	repo := &remote.Repository{Reference: parsed, PlainHTTP: r.plainHTTP(parsed.Registry)}
	cred, err := r.credential(parsed.Registry)
	if err != nil {
		return nil, "", err
	}
	repo.Client = &auth.Client{Client: retry.DefaultClient, Cache: auth.NewCache(), Credential: cred}
	return repo, parsed.Reference, nil
}

func (r Registry) plainHTTP(host string) bool {
	return r.PlainHTTP || isLoopback(host) || hostIn(host, r.PlainHTTPHosts)
}

// credential is what host is sent: nothing in clear text over a network
// (plain HTTP to a host not named for it); the environment's credentials
// only to the hosts they are named for; else the docker config's, which
// are per host already.
func (r Registry) credential(host string) (auth.CredentialFunc, error) {
	if r.plainHTTP(host) && !isLoopback(host) && !hostIn(host, r.PlainHTTPHosts) {
		return nil, nil
	}
	if (r.Username != "" || r.Password != "") && hostIn(host, r.CredentialHosts) {
		return auth.StaticCredential(host, auth.Credential{Username: r.Username, Password: r.Password}), nil
	}
	if r.DockerConfig == "" {
		return nil, nil
	}
	st, err := credentials.NewStore(r.DockerConfig, credentials.StoreOptions{})
	if err != nil {
		return nil, errs.Invalid("docker config %s: %w", r.DockerConfig, err)
	}
	return credentials.Credential(st), nil
}

func hostIn(host string, hosts []string) bool {
	for _, h := range hosts {
		if strings.EqualFold(strings.TrimSpace(h), host) {
			return true
		}
	}
	return false
}

func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Push sends golden g to repo ("registry/repository"), tagged with its key
// and any extra tags; blobs the registry has are not sent again.
func Push(ctx context.Context, s *store.Store, g *golden.Golden, repoRef string, tags []string, r Registry, o PackOptions) (*Stats, error) {
	repo, ref, err := r.repository(repoRef)
	if err != nil {
		return nil, err
	}
	if ref != "" {
		return nil, errs.Invalid("push to %s: give the repository without a tag (the key is the tag; add others with --tag)", repoRef)
	}
	host := repo.Reference.Registry
	st, mdata, err := Pack(ctx, s, g, repo, o)
	if err != nil {
		return nil, registryError(host, err)
	}
	if err := repo.PushReference(ctx, st.Manifest, bytes.NewReader(mdata), g.Key); err != nil {
		return nil, registryError(host, fmt.Errorf("push manifest: %w", err))
	}
	st.BytesSent += st.Manifest.Size
	for _, t := range tags {
		if err := repo.Tag(ctx, st.Manifest, t); err != nil {
			return nil, registryError(host, fmt.Errorf("tag %s: %w", t, err))
		}
	}
	return st, nil
}

// Pull fetches ref ("registry/repository:tag" or "@sha256:…") into the
// store, verified and published atomically.
func Pull(ctx context.Context, s *store.Store, ref string, r Registry, o UnpackOptions) (*Unpacked, error) {
	repo, tag, err := r.repository(ref)
	if err != nil {
		return nil, err
	}
	if tag == "" {
		return nil, errs.Invalid("pull %s: give a tag or a digest (registry/repository:KEY or @sha256:…)", ref)
	}
	if golden.ValidKey(tag) {
		o.WantKey = tag
	}
	o.Origin = "pull " + ref
	res, err := Unpack(ctx, s, repo, tag, o)
	if errors.Is(err, errdef.ErrNotFound) {
		return nil, errs.NotFound("%s not found in the registry", ref)
	}
	return res, registryError(repo.Reference.Registry, err)
}

// registryError turns the registry's answers users can act on into one
// line that says what to do.
func registryError(host string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, auth.ErrBasicCredentialNotFound) {
		return errs.Invalid("registry %s refused access: it wants credentials and none were found (set DBFORK_REGISTRY_USER, DBFORK_REGISTRY_PASSWORD and DBFORK_REGISTRY_HOST=%s, or `docker login %s`)", host, host, host)
	}
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) {
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return errs.Invalid("registry %s refused access (HTTP %d %s): check the credentials (DBFORK_REGISTRY_USER and DBFORK_REGISTRY_PASSWORD, sent only to the hosts in DBFORK_REGISTRY_HOST; or `docker login %s`)",
				host, resp.StatusCode, strings.ToLower(http.StatusText(resp.StatusCode)), host)
		}
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return fmt.Errorf("cannot reach registry %s: %w", host, op)
	}
	return err
}

// Remote is the registry side of a recipe's [cache] (golden.Remote).
type Remote struct {
	Registry Registry
	Check    EngineCheck
	Pack     PackOptions
	MaxBytes int64 // UnpackOptions.MaxBytes
}

// Fetch pulls the golden key from repo; (false, nil) when repo lacks it.
func (rm *Remote) Fetch(ctx context.Context, s *store.Store, key, repo string) (bool, error) {
	if strings.ContainsAny(repo, "@") || strings.Count(repo[strings.LastIndex(repo, "/")+1:], ":") > 0 {
		return false, errs.Invalid("cache repository %s: give it without a tag or digest", repo)
	}
	res, err := Pull(ctx, s, repo+":"+key, rm.Registry, UnpackOptions{Check: rm.Check, Locked: true, MaxBytes: rm.MaxBytes, WantKey: key})
	if errors.Is(err, errs.ErrNotFound) {
		return false, nil
	}
	if err == nil && res.Key != key {
		// Unpack refuses this; a second look costs nothing.
		err = errs.Conflict("%s served golden %s for %s; refused", repo, golden.Short(res.Key), golden.Short(key))
	}
	return err == nil, err
}

// Send pushes g to repo.
func (rm *Remote) Send(ctx context.Context, s *store.Store, g *golden.Golden, repo string) error {
	_, err := Push(ctx, s, g, repo, nil, rm.Registry, rm.Pack)
	return err
}
