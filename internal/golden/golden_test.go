package golden_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/engine/postgres"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

func setup(t *testing.T) (*store.Store, *postgres.Postgres, string) {
	t.Helper()
	dir := testenv.Dir(t)
	s, pg := openIn(t, dir)
	t.Cleanup(func() { testenv.AssertClean(t, dir) })
	return s, pg, dir
}

// openIn opens a store below root and finds PostgreSQL.
func openIn(t *testing.T, root string) (*store.Store, *postgres.Postgres) {
	t.Helper()
	s, err := store.Open(filepath.Join(root, "store"))
	if err != nil {
		t.Fatal(err)
	}
	pg, err := postgres.New(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	return s, pg
}

func load(t *testing.T, path string) *recipe.Recipe {
	t.Helper()
	r, err := recipe.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBuildCachesAndRebuildsOnChange(t *testing.T) {
	s, pg, dir := setup(t)
	ctx := context.Background()
	path := testenv.ShopRecipe(t, filepath.Join(dir, "proj"), 1000)
	res, err := golden.Build(ctx, s, pg, load(t, path), golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Built {
		t.Fatal("first build did not build")
	}
	m := res.Golden.Manifest
	files := golden.FilesOf(t, m)
	if m.Key != res.Golden.Key || len(files) < 100 || m.TotalBytes == 0 || len(m.Inputs) != 2 || !strings.Contains(m.EngineVersion, "PostgreSQL") {
		t.Fatalf("manifest incomplete: key %s files %d bytes %d inputs %d version %q", m.Key, len(files), m.TotalBytes, len(m.Inputs), m.EngineVersion)
	}
	for _, f := range files {
		if f.Path == "PG_VERSION" && f.SHA256 == "" {
			t.Fatal("regular file without checksum in manifest")
		}
	}
	if _, err := os.Stat(filepath.Join(res.Golden.DataDir(), "postmaster.pid")); err == nil {
		t.Fatal("golden has a postmaster.pid: not shut down")
	}

	again, err := golden.Build(ctx, s, pg, load(t, path), golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Built || again.Golden.Key != res.Golden.Key {
		t.Fatalf("unchanged recipe rebuilt or changed key: built=%v key %s vs %s", again.Built, again.Golden.Key, res.Golden.Key)
	}

	// One byte of one seed file changes the key.
	seed := filepath.Join(dir, "proj", "seed", "01.sql")
	data, _ := os.ReadFile(seed)
	if err := os.WriteFile(seed, append(data[:len(data)-2], ';', ' ', '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := golden.Build(ctx, s, pg, load(t, path), golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !changed.Built || changed.Golden.Key == res.Golden.Key {
		t.Fatal("changing a seed file did not rebuild")
	}
	all, err := golden.List(s)
	if err != nil || len(all) != 2 {
		t.Fatalf("list: %d goldens, %v", len(all), err)
	}
	if g, err := golden.Find(s, res.Golden.Key[:8]); err != nil || g.Key != res.Golden.Key {
		t.Fatalf("find by prefix: %v", err)
	}
}

func TestConcurrentBuildsOfOneKeyBuildOnce(t *testing.T) {
	s, pg, dir := setup(t)
	path := testenv.ShopRecipe(t, filepath.Join(dir, "proj"), 10)
	var wg sync.WaitGroup
	results := make([]*golden.Result, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], errs[i] = golden.Build(context.Background(), s, pg, load(t, path), golden.Options{})
		}(i)
	}
	wg.Wait()
	built := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if r.Built {
			built++
		}
		if r.Golden.Key != results[0].Golden.Key {
			t.Fatal("different keys for one recipe")
		}
	}
	if built != 1 {
		t.Fatalf("%d builds for one key, want 1", built)
	}
}

func TestFailedBuildsLeaveNothing(t *testing.T) {
	s, pg, dir := setup(t)
	cases := []struct {
		name  string
		toml  string
		files map[string]string
		want  []string
	}{
		{
			name:  "failing SQL",
			toml:  "engine = \"postgres\"\n[[load]]\nsql = \"seed.sql\"\n",
			files: map[string]string{"seed.sql": "create table a(x int);\ninsert into a values (1);\ninsert into\n  nosuch values (2);\n"},
			want:  []string{"seed.sql:3:", `relation "nosuch" does not exist`, "statement: insert into nosuch values (2);"},
		},
		{
			name:  "failing command",
			toml:  "engine = \"postgres\"\n[[load]]\nrun = \"echo migrating; echo boom >&2; exit 3\"\n",
			files: map[string]string{},
			want:  []string{"exit status 3", "boom"},
		},
		{
			name:  "bad dump",
			toml:  "engine = \"postgres\"\n[[load]]\ndump = \"x.dump\"\n",
			files: map[string]string{"x.dump": "PGDMP garbage"},
			want:  []string{"x.dump: pg_restore failed"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := testenv.WriteRecipe(t, filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")), c.toml, c.files)
			_, err := golden.Build(context.Background(), s, pg, load(t, path), golden.Options{})
			if err == nil {
				t.Fatal("build succeeded")
			}
			t.Logf("error: %v", err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			if left := testenv.TmpBuilds(s.Root); len(left) > 0 {
				t.Errorf("build dirs left: %v", left)
			}
			if all, _ := golden.List(s); len(all) > 0 {
				t.Errorf("a failed build published a golden")
			}
		})
	}
}

func TestDumpSteps(t *testing.T) {
	s, pg, dir := setup(t)
	ctx := context.Background()
	src := testenv.ShopRecipe(t, filepath.Join(dir, "src"), 500)
	res, err := golden.Build(ctx, s, pg, load(t, src), golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Dump the golden's database by running a throwaway server on a copy.
	plain, custom := filepath.Join(dir, "dumps", "plain.sql"), filepath.Join(dir, "dumps", "custom.dump")
	dumpGolden(t, pg, res.Golden.DataDir(), s, plain, custom)
	for _, d := range []string{plain, custom} {
		proj := filepath.Join(dir, "from-"+filepath.Base(d))
		path := testenv.WriteRecipe(t, proj, "engine = \"postgres\"\ndatabase = \"copy\"\nowner = \"shop\"\n[[load]]\ndump = \""+d+"\"\n", map[string]string{})
		r, err := golden.Build(ctx, s, pg, load(t, path), golden.Options{})
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(d), err)
		}
		if r.Golden.Manifest.Inputs[0].Kind != "dump" {
			t.Fatalf("dump input not recorded: %+v", r.Golden.Manifest.Inputs)
		}
		if n := countRows(t, pg, r.Golden.DataDir(), s, "copy"); n != 501 {
			t.Fatalf("%s: restored %d rows, want 501", filepath.Base(d), n)
		}
	}
}

func TestUnknownKeyPrefix(t *testing.T) {
	s, _, _ := setup(t)
	if _, err := golden.Find(s, "abcdef"); err == nil || !strings.Contains(err.Error(), "no golden") {
		t.Fatalf("got %v", err)
	}
	if _, err := golden.Find(s, "../etc"); err == nil {
		t.Fatal("a path was accepted as a key")
	}
}

// A published golden is out of the server user's reach (its dir is
// root-only; the build server ran as that user), and on btrfs its data
// subvolume refuses root's writes too. Clones of it still work: the
// instance and backend suites clone goldens built by this same code.
func TestGoldenIsReadOnly(t *testing.T) {
	testenv.RequireRoot(t)
	for _, fs := range []string{"host", "btrfs"} {
		t.Run(fs, func(t *testing.T) {
			root := testenv.Dir(t)
			if fs != "host" {
				root = testenv.LoopFS(t, fs, 400<<20)
			}
			s, pg := openIn(t, root)
			res, err := golden.Build(context.Background(), s, pg, load(t, testenv.ShopRecipe(t, filepath.Join(root, "proj"), 100)), golden.Options{})
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(res.Golden.Dir)
			if err != nil || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
				t.Fatalf("golden dir is not root-only: %v %v", fi.Mode(), err)
			}
			target := filepath.Join(res.Golden.DataDir(), "PG_VERSION")
			// The server user (what every clone's server runs as) cannot
			// append to a golden file.
			cmd := exec.Command("/bin/sh", "-c", `echo x >> "$1"`, "sh", target)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(s.User.UID), Gid: uint32(s.User.GID)}}
			if out, err := cmd.CombinedOutput(); err == nil {
				t.Fatalf("server user %s wrote to the golden", s.User.Name)
			} else if !strings.Contains(string(out), "ermission denied") {
				t.Fatalf("unexpected failure: %s", out)
			}
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_APPEND, 0)
			if fs == "btrfs" {
				if err == nil {
					f.Close()
					t.Fatal("root could write into a btrfs golden")
				}
				if !errors.Is(err, syscall.EROFS) {
					t.Fatalf("want read-only file system, got %v", err)
				}
			} else if err == nil {
				f.Close()
			}
			if probs, err := golden.Verify(res.Golden, true); err != nil || len(probs) > 0 {
				t.Fatalf("golden changed: %v %v", probs, err)
			}
		})
	}
}
