package api

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/errs"
)

// MaxBody is the largest request body accepted.
const MaxBody = MaxEnvBytes + 64<<10 // a request may carry the client's environment

type peerKey struct{}

// Server serves a Service over HTTP.
type Server struct {
	svc   Service
	log   *slog.Logger
	token string // required on TCP connections
	http  *http.Server
	act   activity
}

// NewServer wraps svc. token guards TCP listeners (unix-socket callers are
// trusted by the socket's mode instead).
func NewServer(svc Service, token string, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{svc: svc, log: log, token: token}
	s.act.last = time.Now()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", s.health)
	mux.HandleFunc("POST /v1/goldens", s.golden)
	mux.HandleFunc("POST /v1/leases", s.acquire)
	mux.HandleFunc("GET /v1/leases", s.leases)
	mux.HandleFunc("DELETE /v1/leases/{id}", s.release)
	mux.HandleFunc("POST /v1/leases/{id}/keep", s.keep)
	mux.HandleFunc("POST /v1/leases/{id}/reset", s.reset)
	mux.HandleFunc("POST /v1/leases/{id}/databases", s.createDatabase)
	mux.HandleFunc("POST /v1/leases/{id}/fresh", s.fresh)
	mux.HandleFunc("DELETE /v1/leases/{id}/databases/{name}", s.dropDatabase)
	mux.HandleFunc("GET /v1/pools", s.pools)
	mux.HandleFunc("DELETE /v1/instances/{id}", s.downKept)
	mux.HandleFunc("POST /v1/instances/{id}/reset", s.resetKept)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, errs.NotFound("no API call %s %s (see docs/api.md)", r.Method, r.URL.Path))
	})
	s.http = &http.Server{
		Handler:           s.act.track(s.guard(mux)),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second, // the request; answers may wait long (wait_seconds)
		IdleTimeout:       time.Minute,
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return s
}

// Serve accepts connections on l until Shutdown.
func (s *Server) Serve(l net.Listener) error {
	if _, ok := l.(*net.TCPListener); ok {
		l = newSlots(l, MaxTCPConns, MaxStrangerConns, StrangerGrace)
	}
	err := s.http.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting and waits for running calls until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }

// connContext records who is at the other end of a unix socket.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if sc, ok := c.(*slotConn); ok {
		ctx = context.WithValue(ctx, slotKey{}, sc)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return context.WithValue(ctx, peerKey{}, Peer{})
	}
	p := Peer{Unix: true, PID: -1, UID: -1, GID: -1}
	if raw, err := uc.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) {
			if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
				p.PID, p.UID, p.GID = int(cred.Pid), int(cred.Uid), int(cred.Gid)
			}
		})
	}
	return context.WithValue(ctx, peerKey{}, p)
}

// PeerFrom is the caller of the request ctx belongs to (false outside a
// request).
func PeerFrom(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

func peerOf(r *http.Request) Peer {
	p, _ := r.Context().Value(peerKey{}).(Peer)
	return p
}

// guard checks the token on TCP connections and caps body sizes.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !peerOf(r).Unix {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || s.token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
				w.Header().Set("WWW-Authenticate", "Bearer")
				w.Header().Set("Connection", "close") // no idle connections for strangers
				writeJSON(w, http.StatusUnauthorized, ErrorBody{Error: "missing or wrong token: send `Authorization: Bearer <token>` with the token from STORE/" + TokenName, Kind: "unauthorized"})
				return
			}
			if sc, ok := r.Context().Value(slotKey{}).(*slotConn); ok {
				sc.promote()
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		next.ServeHTTP(w, r)
	})
}

// decode reads a JSON body strictly: unknown, duplicate or differently
// cased keys, trailing data and oversized bodies are the caller's
// mistakes (encoding/json alone matches keys case-insensitively, lets a
// later duplicate win and stops reading after the first value).
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errs.Invalid("request body over %d bytes", MaxBody)
		}
		return errs.Invalid("reading the request: %w", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return errs.Invalid("empty request body: send a JSON object")
	}
	if err := checkKeys(body, v); err != nil {
		return errs.Invalid("malformed JSON request: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errs.Invalid("malformed JSON request: %w", err)
	}
	if err := dec.Decode(new(json.RawMessage)); !errors.Is(err, io.EOF) {
		return errs.Invalid("malformed JSON request: data after the object")
	}
	return nil
}

// checkKeys walks the top-level object of body and refuses a key seen
// twice or one that is not spelled exactly as a json tag of v's struct.
func checkKeys(body []byte, v any) error {
	known := map[string]bool{}
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			known[name] = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("the body must be one JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("key %q given twice", key)
		}
		seen[key] = true
		if !known[key] {
			return fmt.Errorf("unknown key %q (keys are lower case, see docs/api.md)", key)
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// fail answers with the error's status (errs.HTTP is the one mapping).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, kind := errs.HTTP(err)
	s.log.Debug("api error", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	writeJSON(w, status, ErrorBody{Error: err.Error(), Kind: kind})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h := s.svc.Health()
	h.API, h.Version = APIVersion, Version()
	writeJSON(w, 200, h)
}

func (s *Server) golden(w http.ResponseWriter, r *http.Request) {
	var req GoldenRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := CheckEnv(req.Env); err != nil {
		s.fail(w, r, err)
		return
	}
	g, err := s.svc.EnsureGolden(r.Context(), req, peerOf(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, 200, g)
}

func (s *Server) acquire(w http.ResponseWriter, r *http.Request) {
	var req AcquireRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := req.Check(); err != nil {
		s.fail(w, r, err)
		return
	}
	l, err := s.svc.Acquire(r.Context(), req, peerOf(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, 201, l)
}

func (s *Server) leases(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, map[string]any{"leases": s.svc.Leases(peerOf(r))})
}

func (s *Server) pools(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, map[string]any{"pools": s.svc.Pools(peerOf(r))})
}

func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.Release(r.PathValue("id"), peerOf(r)); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) keep(w http.ResponseWriter, r *http.Request) {
	l, err := s.svc.Keep(r.PathValue("id"), peerOf(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, 200, l)
}

// emptyBody accepts no body or `{}` (strictly, like every body).
func emptyBody(r *http.Request) error {
	if r.ContentLength == 0 {
		return nil
	}
	var req EmptyRequest
	return decode(r, &req)
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	if err := emptyBody(r); err != nil {
		s.fail(w, r, err)
		return
	}
	l, err := s.svc.Reset(r.Context(), r.PathValue("id"), peerOf(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, 200, l)
}

func (s *Server) downKept(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.DownKept(r.Context(), r.PathValue("id"), peerOf(r)); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) resetKept(w http.ResponseWriter, r *http.Request) {
	if err := emptyBody(r); err != nil {
		s.fail(w, r, err)
		return
	}
	l, err := s.svc.ResetKept(r.Context(), r.PathValue("id"), peerOf(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, 200, l)
}

func (s *Server) createDatabase(w http.ResponseWriter, r *http.Request) {
	if err := emptyBody(r); err != nil {
		s.fail(w, r, err)
		return
	}
	db, err := s.svc.CreateDatabase(r.Context(), r.PathValue("id"), peerOf(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, 201, db)
}

func (s *Server) fresh(w http.ResponseWriter, r *http.Request) {
	if err := emptyBody(r); err != nil {
		s.fail(w, r, err)
		return
	}
	db, err := s.svc.Fresh(r.Context(), r.PathValue("id"), peerOf(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, 200, db)
}

func (s *Server) dropDatabase(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.DropDatabase(r.Context(), r.PathValue("id"), r.PathValue("name"), peerOf(r)); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
