package backend_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/testenv"
)

// A clone changed in every way a server (or a test's SQL running as the
// server user) can change one is restored to the golden, file by file,
// and only what changed is redone.
func TestRestoreUndoesEveryKindOfChange(t *testing.T) {
	for _, c := range []struct{ backend, fs string }{{"copy", "host"}, {"reflink", "xfs"}, {"btrfs", "btrfs"}} {
		t.Run(c.backend, func(t *testing.T) {
			root := testenv.Dir(t)
			if c.fs != "host" {
				testenv.RequireRoot(t)
				root = testenv.LoopFS(t, c.fs, 512<<20)
			}
			b, err := backend.Get(c.backend)
			if err != nil {
				t.Fatal(err)
			}
			checkRestore(t, root, b)
		})
	}
}

func checkRestore(t *testing.T, root string, b backend.Backend) {
	ctx := context.Background()
	golden := filepath.Join(root, "golden")
	if err := backend.NewDataDir(golden); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"PG_VERSION": "15\n", "base/1/1259": strings.Repeat("a", 8192), "base/1/2608": "catalog",
		"base/5/16384": strings.Repeat("t", 3*8192), "global/pg_control": "control", "pg_wal/000000010000000000000001": "wal",
	}
	for p, data := range files {
		write(t, filepath.Join(golden, p), data)
	}
	if err := os.Symlink("base/1", filepath.Join(golden, "link")); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(root, "clone")
	if err := b.Prepare(ctx, golden, clone, filepath.Join(root, "scratch")); err != nil {
		t.Fatal(err)
	}
	m, err := backend.MarkClone(clone)
	if err != nil {
		t.Fatal(err)
	}
	rb := b.(backend.Restorer)
	// Nothing changed: nothing is redone.
	did, err := rb.Restore(ctx, golden, clone, m)
	if err != nil || did.Files != 0 || did.Removed != 0 {
		t.Fatalf("restore of an untouched clone: %+v, %v", did, err)
	}
	outside := filepath.Join(root, "outside")
	write(t, filepath.Join(outside, "keep"), "not the clone's")
	// Same size, new content; longer; gone; a new file; a new dir; a dir
	// replaced by a symlink leading out of the clone; a file replaced by
	// a dir; a changed mode; a symlink pointing elsewhere.
	write(t, filepath.Join(clone, "base/1/1259"), strings.Repeat("b", 8192))
	write(t, filepath.Join(clone, "global/pg_control"), "control, written again")
	must(t, os.Remove(filepath.Join(clone, "pg_wal/000000010000000000000001")))
	write(t, filepath.Join(clone, "base/5/16999"), "a table the test made")
	write(t, filepath.Join(clone, "base/77/1"), "a database the test made")
	must(t, os.RemoveAll(filepath.Join(clone, "base/5")))
	must(t, os.Symlink(outside, filepath.Join(clone, "base/5")))
	must(t, os.Remove(filepath.Join(clone, "base/1/2608")))
	must(t, os.Mkdir(filepath.Join(clone, "base/1/2608"), 0o700))
	must(t, os.Chmod(filepath.Join(clone, "PG_VERSION"), 0o666))
	must(t, os.Remove(filepath.Join(clone, "link")))
	must(t, os.Symlink("/etc", filepath.Join(clone, "link")))

	did, err = rb.Restore(ctx, golden, clone, m)
	if err != nil {
		t.Fatal(err)
	}
	sameTree(t, golden, clone)
	if got, err := os.ReadFile(filepath.Join(outside, "keep")); err != nil || string(got) != "not the clone's" {
		t.Fatalf("restore touched what a planted symlink pointed at: %q, %v", got, err)
	}
	// Redone: 1259, pg_control, the WAL file, 2608, PG_VERSION, and
	// base/5's one file; removed: 16999 went with base/77, the symlink at
	// base/5, the dir at 2608.
	if did.Files != 6 || did.Removed != 3 {
		t.Errorf("restore redid %+v, want 6 files and 3 removals", did)
	}
	// The marks now describe the restored clone: another restore is free.
	did, err = rb.Restore(ctx, golden, clone, m)
	if err != nil || did.Files != 0 || did.Removed != 0 {
		t.Fatalf("second restore: %+v, %v", did, err)
	}
	// Marks survive a save and load.
	path := filepath.Join(root, "marks")
	must(t, m.Save(path))
	m2, err := backend.LoadMarks(path)
	if err != nil || len(m2.Files) != len(m.Files) {
		t.Fatalf("marks reloaded: %d files, %v; want %d", len(m2.Files), err, len(m.Files))
	}
	write(t, filepath.Join(clone, "base/5/16384"), "short")
	if did, err = rb.Restore(ctx, golden, clone, m2); err != nil || did.Files != 1 {
		t.Fatalf("restore with reloaded marks: %+v, %v", did, err)
	}
	sameTree(t, golden, clone)
	must(t, b.Remove(ctx, clone, filepath.Join(root, "scratch")))
}

// sameTree fails unless b has exactly a's entries, kinds, modes, symlink
// targets and file contents.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		seen[rel] = true
		q := filepath.Join(b, rel)
		ai, err := os.Lstat(p)
		if err != nil {
			return err
		}
		bi, err := os.Lstat(q)
		if err != nil {
			t.Errorf("%s: missing in the clone", rel)
			return nil
		}
		if rel != "." && ai.Mode() != bi.Mode() {
			t.Errorf("%s: mode %v, golden %v", rel, bi.Mode(), ai.Mode())
		}
		switch {
		case ai.Mode()&fs.ModeSymlink != 0:
			x, _ := os.Readlink(p)
			y, _ := os.Readlink(q)
			if x != y {
				t.Errorf("%s: symlink to %q, golden %q", rel, y, x)
			}
		case ai.Mode().IsRegular():
			x, _ := os.ReadFile(p)
			y, _ := os.ReadFile(q)
			if !bytes.Equal(x, y) {
				t.Errorf("%s: content differs from the golden", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = filepath.WalkDir(b, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(b, p)
		if !seen[rel] {
			t.Errorf("%s: in the clone, not in the golden", rel)
		}
		return nil
	})
}

func write(t testing.TB, p, data string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o700))
	must(t, os.WriteFile(p, []byte(data), 0o600))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRestore: a reset's file work on a clone the shape of a
// PostgreSQL data dir (1,300 files in 4 databases, two 64 MiB segments)
// after a test wrote to 20 files, after it wrote nothing (walk), and a
// new reflink clone.
//
//	go test -run '^$' -bench Restore ./internal/backend
func BenchmarkRestore(b *testing.B) {
	root := testenv.LoopFS(b, "xfs", 1<<30)
	golden := filepath.Join(root, "golden")
	big := strings.Repeat("x", 1<<20)
	for db := 0; db < 4; db++ {
		for f := 0; f < 325; f++ {
			write(b, filepath.Join(golden, "base", fmt.Sprint(db), fmt.Sprint(f)), strings.Repeat("p", 8192))
		}
	}
	for seg := 0; seg < 2; seg++ {
		p := filepath.Join(golden, "base", "0", fmt.Sprintf("16384.%d", seg))
		f, err := os.Create(p)
		must(b, err)
		for i := 0; i < 64; i++ {
			_, err = f.WriteString(big)
			must(b, err)
		}
		must(b, f.Close())
	}
	ctx := context.Background()
	r, _ := backend.Get("reflink")
	clone := filepath.Join(root, "clone")
	must(b, r.Prepare(ctx, golden, clone, ""))
	m, err := backend.MarkClone(clone)
	must(b, err)
	touch := func() {
		for i := 0; i < 19; i++ {
			write(b, filepath.Join(clone, "base", "1", fmt.Sprint(i)), strings.Repeat("w", 8192))
		}
		f, err := os.OpenFile(filepath.Join(clone, "base", "0", "16384.1"), os.O_WRONLY, 0)
		must(b, err)
		_, err = f.WriteAt([]byte("row"), 12345)
		must(b, err)
		must(b, f.Close())
	}
	b.Run("restore", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			touch()
			b.StartTimer()
			if _, err := r.(backend.Restorer).Restore(ctx, golden, clone, m); err != nil {
				b.Fatal(err)
			}
		}
	})
	// walk: nothing written since the last restore, the cost per file of
	// a clone the tests left alone (a golden with slots has 11,000).
	b.Run("walk", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := r.(backend.Restorer).Restore(ctx, golden, clone, m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("clone", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			c := filepath.Join(root, fmt.Sprint("c", i))
			if err := r.Prepare(ctx, golden, c, ""); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			must(b, backend.RemoveDataDir(c))
			b.StartTimer()
		}
	})
}

// A server user swapping a clone's dirs for symlinks while root restores
// it (a process that outlived the stop) can make the restore fail, never
// make it touch what the symlinks point at.
func TestRestoreRacingSymlinkSwaps(t *testing.T) {
	root := testenv.Dir(t)
	ctx := context.Background()
	golden := filepath.Join(root, "golden")
	for db := 0; db < 3; db++ {
		for f := 0; f < 50; f++ {
			write(t, filepath.Join(golden, "base", fmt.Sprint(db), fmt.Sprint(f)), "page")
		}
	}
	outside := filepath.Join(root, "outside")
	for f := 0; f < 50; f++ {
		write(t, filepath.Join(outside, fmt.Sprint(f)), "keep me")
	}
	write(t, filepath.Join(outside, "extra"), "keep me too")
	b, _ := backend.Get("copy")
	clone := filepath.Join(root, "clone")
	must(t, b.Prepare(ctx, golden, clone, ""))
	m, err := backend.MarkClone(clone)
	must(t, err)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		d := filepath.Join(clone, "base", "1")
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.Rename(d, d+"x")
			_ = os.Symlink(outside, d)
			_ = os.WriteFile(filepath.Join(clone, "base", "0", fmt.Sprint(i%50)), []byte("changed"), 0o600)
			_ = os.Remove(d)
			_ = os.Rename(d+"x", d)
		}
	}()
	for i := 0; i < 20; i++ {
		_, _ = b.(backend.Restorer).Restore(ctx, golden, clone, m)
	}
	close(stop)
	<-done
	for f := 0; f < 50; f++ {
		if got, err := os.ReadFile(filepath.Join(outside, fmt.Sprint(f))); err != nil || string(got) != "keep me" {
			t.Fatalf("outside/%d after racing restores: %q, %v", f, got, err)
		}
	}
	if got, err := os.ReadFile(filepath.Join(outside, "extra")); err != nil || string(got) != "keep me too" {
		t.Fatalf("outside/extra removed by a restore: %q, %v", got, err)
	}
	// Once nothing races it, a restore brings the golden back. From no
	// marks: the racer here has root's rights, so it could write a file
	// between a racing restore making it and marking it (size and ctime
	// of its own write then stand as the golden's). In use nobody can:
	// restoreTree makes the clone's root root's alone before it starts,
	// and the instance's processes are ended before that.
	if _, err := b.(backend.Restorer).Restore(ctx, golden, clone, &backend.Marks{}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, golden, clone)
}
