// Package dbforktest gives a Go test its own fresh, pre-seeded database:
//
//	func TestOrders(t *testing.T) {
//		dsn := dbforktest.New(t, "../dbfork.toml")
//		db, _ := sql.Open("pgx", dsn)
//		...
//	}
//
// The clone comes from a `dbfork serve` for the store ($DBFORK_STORE, or
// dbfork's default), warm from its pool in milliseconds; the lease ends
// with the test (or with the test process, if it dies). The daemon is
// found by the rule every client follows (docs/api.md, "Finding the
// daemon"): $DBFORK_SOCKET when set, else `dbfork daemon start --json`
// (the binary is $DBFORK_BIN or dbfork on PATH), which starts one for the
// test run that leaves by itself when idle. Without a dbfork binary, a
// daemon already running for the store is used, or else the golden is
// built if needed and a clone is started in the test process. The instance is removed when the test ends; with
// DBFORK_KEEP_FAILED=1 the instance of a failed test is kept running and
// its DSN logged, for a look with psql/mariadb (`dbfork down ID` later).
package dbforktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/project"
	"github.com/dbfork/dbfork/internal/store"
)

// Instance is a test's database.
type Instance struct {
	ID  string            // dbfork instance id (`dbfork ls`, `dbfork down`)
	DSN string            // over 127.0.0.1 (postgres:// or mysql://)
	Env map[string]string // DATABASE_URL, PG*/MYSQL_*, DBFORK_INSTANCE
	// Backend is how the clone was made (overlay, reflink, btrfs,
	// userns-overlay, copy).
	Backend string
	// Mode is how Fresh made the data fresh: ModeDatabase, ModeReset or
	// ModeLease (New and Open: always ModeLease).
	Mode     string
	Database string // ModeDatabase, ModeSlot: the fresh database's name
}

// KeepEnv names the variable that keeps failed tests' instances.
const KeepEnv = "DBFORK_KEEP_FAILED"

// RecipeEnv names the recipe New, Open and Fresh use when they are given
// "" (else ./dbfork.toml); BackendEnv the clone backend (default auto).
// The same variables every dbfork client honours (docs/api.md).
const (
	RecipeEnv  = "DBFORK_RECIPE"
	BackendEnv = "DBFORK_BACKEND"
)

// recipeOr is the recipe path to use for p: p, else $DBFORK_RECIPE, else
// ./dbfork.toml.
func recipeOr(p string) string {
	if p != "" {
		return p
	}
	if e := os.Getenv(RecipeEnv); e != "" {
		return e
	}
	return "dbfork.toml"
}

func orAuto(b string) string {
	if b == "" {
		return "auto"
	}
	return b
}

// New returns the DSN of a fresh clone of the recipe's golden, removed
// when t ends.
func New(t testing.TB, recipePath string) string {
	t.Helper()
	return Open(t, recipePath).DSN
}

// Open is New with the instance's id and environment.
func Open(t testing.TB, recipePath string) *Instance {
	t.Helper()
	abs, err := filepath.Abs(recipeOr(recipePath))
	if err != nil {
		t.Fatalf("dbforktest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if sock, found, err := daemonSocket(ctx); err != nil {
		t.Fatalf("dbforktest: %v", err)
	} else if found {
		c, err := api.Dial(ctx, sock)
		if err != nil {
			t.Fatalf("dbforktest: daemon at %s: %v", sock, err)
		}
		return fromDaemon(ctx, t, c, abs)
	}
	root, err := store.Locate(os.Getenv("DBFORK_STORE"), userStores(), os.Getenv("XDG_DATA_HOME"))
	if err != nil {
		t.Fatalf("dbforktest: %v", err)
	}
	s, err := store.OpenWith(root, store.Options{CowExtSize: store.CowExtSizeSetting(os.LookupEnv("DBFORK_XFS_COWEXTSIZE"))})
	if err != nil {
		t.Fatalf("dbforktest: %v", err)
	}
	if c, err := api.Dial(ctx, api.SocketPath(s.Root)); err == nil {
		return fromDaemon(ctx, t, c, abs)
	} else if !errors.Is(err, api.ErrNoDaemon) {
		t.Logf("dbforktest: not using dbfork serve: %v", err)
	}
	return local(ctx, t, s, abs)
}

// daemonSocket applies the first two steps of the rule: $DBFORK_SOCKET, or
// the socket `dbfork daemon start --json` prints. found is false when there
// is no dbfork binary to ask (then the caller works without a daemon).
func daemonSocket(ctx context.Context) (sock string, found bool, err error) {
	if s := os.Getenv("DBFORK_SOCKET"); s != "" {
		return s, true, nil
	}
	bin := os.Getenv("DBFORK_BIN")
	if bin == "" {
		if bin, err = exec.LookPath("dbfork"); err != nil {
			return "", false, nil
		}
	}
	args := []string{"daemon", "start", "--json"}
	if st := os.Getenv("DBFORK_STORE"); st != "" {
		args = append([]string{"--store", st}, args...)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", false, fmt.Errorf("%s daemon start: %s", bin, strings.TrimPrefix(msg, "dbfork: "))
	}
	var info struct {
		Socket string `json:"socket"`
	}
	if err := json.Unmarshal(out, &info); err != nil || info.Socket == "" {
		return "", false, fmt.Errorf("%s daemon start --json printed %q, not the daemon's socket", bin, bytes.TrimSpace(out))
	}
	return info.Socket, true, nil
}

func keep(t testing.TB) bool { return t.Failed() && os.Getenv(KeepEnv) != "" }

func fromDaemon(ctx context.Context, t testing.TB, c *api.Client, recipePath string) *Instance {
	t.Helper()
	l, err := c.Acquire(ctx, api.AcquireRequest{Recipe: recipePath, PID: os.Getpid(), Env: api.Environ(), Backend: os.Getenv(BackendEnv)})
	if err != nil {
		t.Fatalf("dbforktest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if keep(t) {
			if _, err := c.Keep(ctx, l.ID); err == nil {
				t.Logf("dbforktest: kept instance %s of the failed test: %s (remove it with `dbfork down %s`)", l.ID, l.DSN, l.ID)
				return
			}
		}
		if err := c.Release(ctx, l.ID); err != nil {
			t.Errorf("dbforktest: release %s: %v", l.ID, err)
		}
	})
	return &Instance{ID: l.ID, DSN: l.DSN, Env: l.Env, Backend: l.Backend, Mode: ModeLease}
}

func local(ctx context.Context, t testing.TB, s *store.Store, recipePath string) *Instance {
	t.Helper()
	r, err := project.LoadRecipe(ctx, recipePath)
	if err != nil {
		t.Fatalf("dbforktest: %v", err)
	}
	// The store's engine cache backs installed servers, as for the CLI.
	p := project.New(project.Options{Store: s})
	b, err := p.Golden(ctx, r)
	if err != nil {
		t.Fatalf("dbforktest: %v", err)
	}
	in, err := p.Clone(ctx, b, instance.Options{Backend: orAuto(os.Getenv(BackendEnv))})
	if err != nil {
		t.Fatalf("dbforktest: %v", err)
	}
	st := in.State
	t.Cleanup(func() {
		if keep(t) {
			if err := in.Detach(); err == nil {
				in.Release()
				t.Logf("dbforktest: kept instance %s of the failed test: %s (remove it with `dbfork down %s`)", st.ID, st.Conn.URL, st.ID)
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := in.Destroy(ctx, s); err != nil {
			t.Errorf("dbforktest: remove instance %s: %v", st.ID, err)
		}
	})
	return &Instance{ID: st.ID, DSN: st.Conn.URL, Env: st.ClientEnv(), Backend: st.Backend, Mode: ModeLease}
}

// userStores is where `dbfork store init --user` puts users' stores
// ($DBFORK_USER_STORES as dbfork reads it, else its default).
func userStores() string {
	if d := os.Getenv("DBFORK_USER_STORES"); d != "" {
		return d
	}
	return store.DefaultUserStores
}
