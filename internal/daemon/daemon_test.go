package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/daemon"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/engine/postgres"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// world is a real daemon serving a real store over a real unix socket.
type world struct {
	t      testing.TB
	root   string
	store  *store.Store
	d      *daemon.Daemon
	c      *api.Client
	sock   string
	recipe string
	closed bool
}

func newWorld(t testing.TB, poolToml string) *world {
	t.Helper()
	testenv.RequireRoot(t)
	return newWorldAt(t, testenv.Dir(t), "", poolToml)
}

// newWorldAt keeps its store below root; head goes first in the recipe
// (bindir = ...).
func newWorldAt(t testing.TB, root, head, poolToml string) *world {
	t.Helper()
	return newWorldOpts(t, root, head, poolToml, nil)
}

// newWorldOpts is newWorldAt with daemon options changed by opts.
func newWorldOpts(t testing.TB, root, head, poolToml string, opts func(*daemon.Options)) *world {
	t.Helper()
	s, err := store.Open(filepath.Join(root, "store"))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, root: root, store: s}
	w.recipe = testenv.WriteRecipe(t, filepath.Join(root, "proj"), head+`
engine = "postgres"
database = "shop"
owner = "shop"
[[load]]
sql = ["seed.sql"]
`+poolToml, map[string]string{"seed.sql": "create table notes(id serial primary key, who text);\ninsert into notes(who) values ('golden');\n"})
	o := daemon.Options{Store: s, Backoff: 50 * time.Millisecond, Watch: 20 * time.Millisecond, Log: testLogger(),
		OpenEngine: func(ctx context.Context, w engine.Want) (engine.Engine, error) {
			return postgres.New(ctx, w.Bindir, w.Version)
		}}
	if opts != nil {
		opts(&o)
	}
	w.d = daemon.New(o)
	w.sock = api.SocketPath(s.Root)
	ln, err := net.Listen("unix", w.sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(w.d, "secret-token", testLogger())
	go func() { _ = srv.Serve(ln) }()
	w.c, err = api.Dial(context.Background(), w.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Shutdown(context.Background())
		w.close()
		testenv.AssertClean(t, root)
		if ins, _ := instance.List(s); len(ins) > 0 {
			t.Errorf("%d instances left after the daemon closed: %v", len(ins), ins)
		}
	})
	return w
}

func (w *world) close() {
	if w.closed {
		return
	}
	w.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.d.Close(ctx); err != nil {
		w.t.Errorf("close daemon: %v", err)
	}
}

func (w *world) acquire(req api.AcquireRequest) *api.Lease {
	w.t.Helper()
	if req.Recipe == "" {
		req.Recipe = w.recipe
	}
	l, err := w.c.Acquire(context.Background(), req)
	if err != nil {
		w.t.Fatalf("acquire: %v", err)
	}
	return l
}

func (w *world) pool() api.PoolInfo {
	w.t.Helper()
	ps, err := w.c.Pools(context.Background())
	if err != nil || len(ps) == 0 {
		w.t.Fatalf("pools: %v %v", ps, err)
	}
	return ps[len(ps)-1]
}

// waitPool polls the pool until cond holds.
func (w *world) waitPool(what string, cond func(api.PoolInfo) bool) api.PoolInfo {
	w.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := w.pool()
		if cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for %s: %+v", what, p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func query(t *testing.T, dsn, sql string) []string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Leases are isolated, released instances are thrown away (never handed
// out again) and replaced in the background.
func TestLeasesAreIsolatedAndNeverReused(t *testing.T) {
	w := newWorld(t, "[pool]\nmin = 2\nmax = 4\n")
	if _, err := w.d.Warm(context.Background(), w.recipe, "auto"); err != nil {
		t.Fatal(err)
	}
	w.waitPool("2 ready", func(p api.PoolInfo) bool { return p.Ready == 2 })
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for c := 0; c < 3; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 4; i++ {
				l, err := w.c.Acquire(context.Background(), api.AcquireRequest{Recipe: w.recipe})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[l.ID] {
					t.Errorf("instance %s handed out twice", l.ID)
				}
				seen[l.ID] = true
				mu.Unlock()
				me := fmt.Sprintf("client%d-%d", c, i)
				query(t, l.DSN, "insert into notes(who) values ('"+me+"') returning who")
				got := query(t, l.DSN, "select who from notes order by id")
				if strings.Join(got, ",") != "golden,"+me {
					t.Errorf("lease %s sees %v, want only the golden row and its own", l.ID, got)
				}
				if l.Env["DATABASE_URL"] != l.DSN || l.Env["DBFORK_INSTANCE"] != l.ID || l.Env["PGDATABASE"] != "shop" {
					t.Errorf("lease env %v", l.Env)
				}
				if err := w.c.Release(context.Background(), l.ID); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	p := w.waitPool("refilled", func(p api.PoolInfo) bool { return p.Ready == 2 && p.Discarding == 0 && p.Leased == 0 && p.Warming == 0 })
	if p.Max != 4 || p.Engine != "postgres" {
		t.Errorf("pool %+v", p)
	}
	// Every released instance is gone from the store.
	ins, _ := instance.List(w.store)
	for _, st := range ins {
		if seen[st.ID] {
			t.Errorf("released instance %s still exists", st.ID)
		}
	}
	if len(ins) != 2 {
		t.Errorf("%d instances in the store, want the 2 ready ones", len(ins))
	}
	if err := w.c.Release(context.Background(), "0badf00d"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("release of an unknown lease: %v", err)
	}
}

// A lease ends when its holder process exits, or when its TTL passes.
func TestLeaseDiesWithHolderAndTTL(t *testing.T) {
	w := newWorld(t, "[pool]\nmin = 0\nmax = 3\n")
	holder := exec.Command("sleep", "300")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	l := w.acquire(api.AcquireRequest{PID: holder.Process.Pid})
	if l.HolderPID != holder.Process.Pid {
		t.Fatalf("holder %d, want %d", l.HolderPID, holder.Process.Pid)
	}
	ttl := w.acquire(api.AcquireRequest{TTLSeconds: 0.3, PID: os.Getpid()})
	if ttl.ExpiresAt == nil {
		t.Fatal("no expiry on a TTL lease")
	}
	mine := w.acquire(api.AcquireRequest{}) // held by this test process (SO_PEERCRED)
	if mine.HolderPID != os.Getpid() {
		t.Fatalf("peer pid %d, want ours %d", mine.HolderPID, os.Getpid())
	}
	_ = holder.Process.Kill()
	_ = holder.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ls, err := w.c.Leases(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 1 && ls[0].ID == mine.ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leases of a dead holder / expired TTL not reclaimed: %+v", ls)
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.waitPool("reclaimed ones destroyed", func(p api.PoolInfo) bool { return p.Discarding == 0 && p.Leased == 1 && p.Warming == 0 })
	for _, id := range []string{l.ID, ttl.ID} {
		if _, err := instance.Load(w.store, id); err == nil {
			t.Errorf("reclaimed instance %s still in the store", id)
		}
	}
}

// Shutdown with leases out stops every instance; a kept lease survives it
// as an ordinary detached instance.
func TestCloseWithLeasesOutAndKeep(t *testing.T) {
	w := newWorld(t, "[pool]\nmin = 1\nmax = 4\n")
	a := w.acquire(api.AcquireRequest{})
	b := w.acquire(api.AcquireRequest{})
	kept, err := w.c.Keep(context.Background(), b.ID)
	if err != nil || !kept.Kept {
		t.Fatalf("keep: %+v %v", kept, err)
	}
	if _, err := w.c.Keep(context.Background(), b.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("second keep: %v", err)
	}
	w.close()
	if _, err := instance.Load(w.store, a.ID); err == nil {
		t.Errorf("leased instance %s survived shutdown", a.ID)
	}
	if got := query(t, b.DSN, "select who from notes"); len(got) != 1 {
		t.Errorf("kept instance: %v", got)
	}
	if err := instance.Down(context.Background(), w.store, b.ID); err != nil {
		t.Fatalf("down kept instance: %v", err)
	}
}

// A changed recipe gets a new pool; the old one drains and closes.
func TestRecipeChangeRetiresOldPool(t *testing.T) {
	w := newWorld(t, "[pool]\nmin = 1\nmax = 2\n")
	l := w.acquire(api.AcquireRequest{})
	old := l.Golden
	seed := filepath.Join(filepath.Dir(w.recipe), "seed.sql")
	if err := os.WriteFile(seed, []byte("create table notes(id serial primary key, who text);\ninsert into notes(who) values ('v2');\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l2 := w.acquire(api.AcquireRequest{})
	if l2.Golden == old {
		t.Fatal("changed seed file did not give a new golden")
	}
	if got := query(t, l2.DSN, "select who from notes"); len(got) != 1 || got[0] != "v2" {
		t.Errorf("new lease sees %v", got)
	}
	ps, _ := w.c.Pools(context.Background())
	retired := 0
	for _, p := range ps {
		if p.Golden == old {
			retired++
			if !p.Retired || p.Min != 0 {
				t.Errorf("old pool not retired: %+v", p)
			}
		}
	}
	if retired != 1 {
		t.Fatalf("pools %+v", ps)
	}
	_ = w.c.Release(context.Background(), l.ID)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ps, _ := w.c.Pools(context.Background())
		if len(ps) == 1 && ps[0].Golden == l2.Golden {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("old pool never closed: %+v", ps)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An instance that cannot start fails the acquire with the server's
// reason, and the pool backs off instead of spinning.
func TestAcquireReportsStartFailure(t *testing.T) {
	w := newWorld(t, "[pool]\nmin = 1\nmax = 2\n[settings]\nshared_buffers = \"-5\"\n")
	_, err := w.c.Acquire(context.Background(), api.AcquireRequest{Recipe: w.recipe, WaitSeconds: 30})
	if err == nil || !strings.Contains(err.Error(), "shared_buffers") {
		t.Fatalf("acquire with a broken setting: %v", err)
	}
	p := w.pool()
	if p.LastError == "" {
		t.Errorf("pool does not report the failure: %+v", p)
	}
}

// Bad requests get a 4xx with a one-line reason; nothing is created.
func TestAPIBadRequests(t *testing.T) {
	w := newWorld(t, "[pool]\nmin = 0\nmax = 1\n")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", w.sock)
	}}}
	missing := filepath.Join(w.root, "nope", "dbfork.toml")
	cases := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"malformed JSON", "POST", "/v1/leases", `{"recipe": `, 400, "malformed JSON"},
		{"not an object", "POST", "/v1/leases", `[1,2]`, 400, "malformed JSON"},
		{"empty body", "POST", "/v1/leases", ``, 400, "empty request body"},
		{"unknown field", "POST", "/v1/leases", `{"recipe":"` + w.recipe + `","colour":"red"}`, 400, `unknown key "colour"`},
		{"trailing data", "POST", "/v1/leases", `{"recipe":"` + w.recipe + `"} {}`, 400, "data after the object"},
		{"oversized body", "POST", "/v1/leases", `{"recipe":"` + strings.Repeat("a", api.MaxBody) + `"}`, 400, "over"},
		{"no recipe", "POST", "/v1/leases", `{}`, 400, "needs \"recipe\""},
		{"relative recipe", "POST", "/v1/leases", `{"recipe":"../../etc/dbfork.toml"}`, 400, "is relative"},
		{"missing recipe", "POST", "/v1/leases", `{"recipe":"` + missing + `"}`, 404, "nope"},
		{"negative ttl", "POST", "/v1/leases", `{"recipe":"` + w.recipe + `","ttl_seconds":-1}`, 400, "negative"},
		{"bad pool size", "POST", "/v1/leases", `{"recipe":"` + w.recipe + `","min":5,"max":2}`, 400, "min <= max"},
		{"unknown backend", "POST", "/v1/leases", `{"recipe":"` + w.recipe + `","backend":"zfs"}`, 400, "unknown backend"},
		{"dead holder", "POST", "/v1/leases", `{"recipe":"` + w.recipe + `","pid":999999999}`, 400, "not a running process"},
		{"path in lease id", "DELETE", "/v1/leases/..%2f..%2fgoldens", ``, 400, "not an instance id"},
		{"unknown lease", "DELETE", "/v1/leases/deadbeef", ``, 404, "no lease deadbeef"},
		{"unknown call", "GET", "/v1/nothing", ``, 404, "no API call"},
		{"wrong method", "PUT", "/v1/health", ``, 404, "no API call"},
		{"golden: missing recipe", "POST", "/v1/goldens", `{"recipe":"` + missing + `"}`, 404, "nope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, "http://dbfork"+c.path, bytes.NewBufferString(c.body))
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var eb api.ErrorBody
			if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
				t.Fatalf("error body is not JSON: %v", err)
			}
			if resp.StatusCode != c.status || !strings.Contains(eb.Error, c.want) || strings.Contains(eb.Error, "\n") {
				t.Errorf("%s %s: %d %q, want %d containing %q on one line", c.method, c.path, resp.StatusCode, eb.Error, c.status, c.want)
			}
		})
	}
	if ps, _ := w.c.Pools(context.Background()); len(ps) != 0 {
		t.Errorf("bad requests made pools: %+v", ps)
	}
}

// Over TCP every call needs the token.
func TestTCPNeedsToken(t *testing.T) {
	w := newWorld(t, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(w.d, "secret-token", testLogger())
	go func() { _ = srv.Serve(ln) }()
	defer srv.Shutdown(context.Background())
	for _, tok := range []string{"", "wrong"} {
		_, err := api.DialTCP(ln.Addr().String(), tok).Health(context.Background())
		if err == nil || !strings.Contains(err.Error(), "token") {
			t.Errorf("token %q: %v", tok, err)
		}
	}
	h, err := api.DialTCP(ln.Addr().String(), "secret-token").Health(context.Background())
	if err != nil || h.Status != "ok" {
		t.Fatalf("with token: %+v %v", h, err)
	}
	// No SO_PEERCRED over TCP: a lease needs a pid or a TTL.
	_, err = api.DialTCP(ln.Addr().String(), "secret-token").Acquire(context.Background(), api.AcquireRequest{Recipe: w.recipe})
	if !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("TCP acquire without holder: %v", err)
	}
}

// A recipe's hot tables are copied up while the instance waits in the
// pool (OverlayFS on ext4 would otherwise copy them on the first write).
func TestHotTablesCopiedUpInPool(t *testing.T) {
	w := newWorld(t, "[pool]\nmin = 1\nmax = 2\nhot = [\"notes\"]\n")
	l := w.acquire(api.AcquireRequest{Backend: "overlay"})
	st, err := instance.Load(w.store, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	g, err := golden.Lookup(w.store, l.Golden)
	if err != nil {
		t.Fatal(err)
	}
	u, err := instance.Inspect(st, g.DataDir())
	if err != nil {
		t.Fatal(err)
	}
	files, err := (&postgres.Postgres{}).TableFiles(context.Background(), st.Server, []string{"notes"})
	if err != nil || len(files) < 2 { // the heap and its primary key at least
		t.Fatalf("notes files: %v %v", files, err)
	}
	up := map[string]bool{}
	for _, f := range u.Files {
		up[f.Path] = f.CopiedUp
	}
	for _, f := range files {
		if !up[f] {
			t.Errorf("hot file %s not copied up before the lease (upper: %v)", f, u.Files)
		}
	}
	if _, err := w.c.Acquire(context.Background(), api.AcquireRequest{Recipe: filepath.Join(filepath.Dir(w.recipe), "bad.toml")}); err == nil {
		t.Error("acquire of a missing recipe succeeded")
	}
	// An unknown hot table fails the pool's starts with a clear reason.
	bad := testenv.WriteRecipe(t, filepath.Join(w.root, "bad"), "engine = \"postgres\"\n[[load]]\nsql = [\"s.sql\"]\n[pool]\nmin = 0\nmax = 1\nhot = [\"nosuch\"]\n",
		map[string]string{"s.sql": "create table t(x int);\n"})
	_, err = w.c.Acquire(context.Background(), api.AcquireRequest{Recipe: bad, WaitSeconds: 30})
	if err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("unknown hot table: %v", err)
	}
}

// A pool at max with every instance leased makes callers wait up to
// wait_seconds, then answers busy: HTTP 503 on the wire, errs.ErrBusy in
// the client (exit 6 in the CLI). A release lets the next caller in.
func TestBusyWhenPoolIsFull(t *testing.T) {
	w := newWorld(t, "[pool]\nmin = 0\nmax = 1\n")
	first := w.acquire(api.AcquireRequest{})
	start := time.Now()
	_, err := w.c.Acquire(context.Background(), api.AcquireRequest{Recipe: w.recipe, WaitSeconds: 0.3})
	if !errors.Is(err, errs.ErrBusy) || errs.ExitCode(err) != errs.ExitBusy {
		t.Fatalf("full pool: want busy, got %v", err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("answered busy after %v, before wait_seconds", waited)
	}
	if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "max") {
		t.Fatalf("busy error should say the pool is at its max, on one line: %q", err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", w.sock)
	}}}
	resp, err := hc.Post("http://dbfork/v1/leases", "application/json",
		bytes.NewBufferString(`{"recipe":"`+w.recipe+`","wait_seconds":0.1,"pid":`+fmt.Sprint(os.Getpid())+`}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("full pool over the wire: status %d, want 503", resp.StatusCode)
	}
	if err := w.c.Release(context.Background(), first.ID); err != nil {
		t.Fatal(err)
	}
	next := w.acquire(api.AcquireRequest{WaitSeconds: 30})
	if next.ID == first.ID {
		t.Fatal("a released instance was handed out again")
	}
}
