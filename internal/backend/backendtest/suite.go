// Package backendtest is the one test suite every clone backend passes on
// a real filesystem.
package backendtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/fsutil"
)

// Run checks b against a golden it builds under dir (a directory on the
// filesystem under test).
func Run(t *testing.T, b backend.Backend, dir string) {
	ctx := context.Background()
	if err := b.Probe(ctx, dir); err != nil {
		t.Fatalf("probe %s in %s: %v", b.Name(), dir, err)
	}
	golden := filepath.Join(dir, "goldens", "g", "data")
	makeGolden(t, golden)
	s := &suite{ctx: ctx, b: b, dir: dir, golden: golden, before: snapshotTree(t, golden), holders: map[string]*holder{}}
	if m, _ := filepath.Glob(filepath.Join(dir, ".probe-*")); len(m) > 0 {
		t.Errorf("probe left its scratch dir: %v", m)
	}
	c1, r1, s1 := s.clone(t, "one")
	c2, r2, s2 := s.clone(t, "two")

	t.Run("same content, modes and owners", func(t *testing.T) {
		if got := snapshotTree(t, c1); !equalTrees(t, s.before, got) {
			t.Fatal("clone differs from golden")
		}
	})
	t.Run("writes stay in the clone", func(t *testing.T) { s.writesStay(t, c1, c2) })
	t.Run("prepare onto an existing clone is refused", func(t *testing.T) { s.secondPrepare(t, c1, r1, s1) })
	t.Run("sparse files stay sparse", func(t *testing.T) { s.sparse(t, c2) })
	t.Run("hard links and xattrs", func(t *testing.T) { hardLinksAndXattrs(t, c2) })
	t.Run("remove never deletes through a mount", func(t *testing.T) { s.removeWithMount(t, r2, s2) })
	t.Run("remove leaves nothing", func(t *testing.T) { s.removeAll(t, [][2]string{{r1, s1}, {r2, s2}}) })
}

// suite is one run of Run: the backend, its golden and the clones made
// of it.
type suite struct {
	ctx     context.Context
	b       backend.Backend
	dir     string
	golden  string
	before  map[string]entry // the golden as it was made
	holders map[string]*holder
}

// clone returns where the test sees the clone, the clone path and the
// scratch dir. A namespaced backend's clone is seen through a process
// holding its namespace, as dbfork sees a running server's.
func (s *suite) clone(t *testing.T, name string) (string, string, string) {
	c := filepath.Join(s.dir, "instances", name, "data")
	sc := filepath.Join(s.dir, "instances", name, "scratch")
	if err := os.MkdirAll(filepath.Dir(c), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.b.Prepare(s.ctx, s.golden, c, sc); err != nil {
		t.Fatalf("prepare %s: %v", name, err)
	}
	if ns, ok := s.b.(backend.Namespaced); ok {
		h := startHolder(t, ns.Wrap(s.golden, c, sc))
		s.holders[c] = h
		return h.root + c, c, sc
	}
	return c, c, sc
}

// remove stops the namespace holder of a clone, if any, then removes it.
func (s *suite) remove(t *testing.T, c, sc string) error {
	if h := s.holders[c]; h != nil {
		h.stop(t)
	}
	return s.b.Remove(s.ctx, c, sc)
}

func (s *suite) writesStay(t *testing.T, c1, c2 string) {
	writeClone(t, c1)
	if got := snapshotTree(t, s.golden); !equalTrees(t, s.before, got) {
		t.Fatal("golden changed after writing to a clone")
	}
	if got := snapshotTree(t, c2); !equalTrees(t, s.before, got) {
		t.Fatal("a write to one clone showed up in another")
	}
	data, err := os.ReadFile(filepath.Join(c1, "base", "big"))
	if err != nil || !bytes.Equal(data[4096:4101], []byte("dirty")) {
		t.Fatalf("clone lost its own write: %v", err)
	}
}

func (s *suite) secondPrepare(t *testing.T, c1, r1, s1 string) {
	if err := s.b.Prepare(s.ctx, s.golden, r1, s1); err == nil {
		t.Fatal("a second prepare onto a live clone succeeded")
	}
	data, err := os.ReadFile(filepath.Join(c1, "base", "big"))
	if err != nil || !bytes.Equal(data[4096:4101], []byte("dirty")) {
		t.Fatalf("the refused prepare changed the clone: %v", err)
	}
}

func (s *suite) sparse(t *testing.T, c2 string) {
	var g, c unix.Stat_t
	if err := unix.Stat(filepath.Join(s.golden, "base", "sparse"), &g); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(filepath.Join(c2, "base", "sparse"), &c); err != nil {
		t.Fatal(err)
	}
	if c.Size != g.Size || c.Blocks*512 > g.Blocks*512+(256<<10) {
		t.Fatalf("sparse file: golden %d bytes in %d blocks, clone %d bytes in %d blocks", g.Size, g.Blocks, c.Size, c.Blocks)
	}
}

func hardLinksAndXattrs(t *testing.T, c2 string) {
	a, err1 := os.ReadFile(filepath.Join(c2, "base", "big"))
	l, err2 := os.ReadFile(filepath.Join(c2, "base", "big.link"))
	if err1 != nil || err2 != nil || !bytes.Equal(a, l) {
		t.Fatalf("hard link content differs: %v %v", err1, err2)
	}
	buf := make([]byte, 64)
	n, err := unix.Lgetxattr(filepath.Join(c2, "PG_VERSION"), "user.dbfork", buf)
	if err != nil || string(buf[:n]) != "kept" {
		t.Fatalf("xattr: %q %v", buf[:max(n, 0)], err)
	}
}

func (s *suite) removeWithMount(t *testing.T, r2, s2 string) {
	if os.Geteuid() != 0 {
		removeWhileHeld(t, s.b, s.holders[r2], r2, s2, s.golden, s.before)
		return
	}
	victim := filepath.Join(s.dir, "victim")
	if err := os.MkdirAll(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(r2, "base", "mnt")
	if err := os.Mkdir(at, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(victim, at, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	_ = s.b.Remove(s.ctx, r2, s2) // refused, or done after unmounting: either way
	_ = fsutil.UnmountAllUnder(r2)
	if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
		t.Fatalf("remove deleted through a mount: %v", err)
	}
	if err := s.remove(t, r2, s2); err != nil {
		t.Fatalf("remove after unmount: %v", err)
	}
}

func (s *suite) removeAll(t *testing.T, clones [][2]string) {
	for _, c := range clones {
		if err := s.remove(t, c[0], c[1]); err != nil {
			t.Fatal(err)
		}
		if err := s.b.Remove(s.ctx, c[0], c[1]); err != nil {
			t.Fatalf("second remove: %v", err)
		}
		for _, p := range c {
			if _, err := os.Lstat(p); err == nil {
				t.Fatalf("%s still exists after remove", p)
			}
		}
	}
	if m, _ := fsutil.MountsUnder(s.dir); len(m) > 0 {
		t.Fatalf("mounts left after remove: %v", m)
	}
	if got := snapshotTree(t, s.golden); !equalTrees(t, s.before, got) {
		t.Fatal("golden changed by remove")
	}
}

// makeGolden writes a small data-dir-like tree: nested dirs, a multi-MiB
// file, a symlink, restrictive modes, and (as root) a foreign owner.
func makeGolden(t *testing.T, golden string) {
	if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := backend.NewDataDir(golden); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	files := map[string][]byte{
		"PG_VERSION":        []byte("15\n"),
		"base/big":          big,
		"base/1/small":      []byte("small"),
		"global/pg_control": bytes.Repeat([]byte{1}, 8192),
		"empty":             nil,
	}
	for name, data := range files {
		p := filepath.Join(golden, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("base/1/small", filepath.Join(golden, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(golden, "base", "big"), filepath.Join(golden, "base", "big.link")); err != nil {
		t.Fatal(err)
	}
	// 1 MiB of hole, then 4 KiB of data.
	sp, err := os.Create(filepath.Join(golden, "base", "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.WriteAt(bytes.Repeat([]byte{9}, 4096), 1<<20); err != nil {
		t.Fatal(err)
	}
	sp.Close()
	if err := unix.Lsetxattr(filepath.Join(golden, "PG_VERSION"), "user.dbfork", []byte("kept"), 0); err != nil {
		t.Fatalf("set xattr: %v", err)
	}
	if os.Geteuid() == 0 {
		_ = filepath.WalkDir(golden, func(p string, d fs.DirEntry, err error) error {
			if err == nil {
				err = os.Lchown(p, 65534, 65534)
			}
			return err
		})
	}
}

func writeClone(t *testing.T, c string) {
	f, err := os.OpenFile(filepath.Join(c, "base", "big"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("dirty"), 4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(c, "new"), []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(c, "empty")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(c, "base", "1")); err != nil {
		t.Fatal(err)
	}
}

type entry struct {
	mode     uint32
	uid, gid uint32
	sum      [32]byte
	link     string
}

func snapshotTree(t *testing.T, root string) map[string]entry {
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		e := entry{mode: st.Mode, uid: st.Uid, gid: st.Gid}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.sum = sha256.Sum256(data)
		case unix.S_IFLNK:
			e.link, _ = os.Readlink(p)
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalTrees(t *testing.T, a, b map[string]entry) bool {
	ok := true
	for k, ea := range a {
		eb, found := b[k]
		if !found {
			t.Errorf("%s missing", k)
			ok = false
		} else if ea != eb {
			t.Errorf("%s differs: %s vs %s", k, describe(ea), describe(eb))
			ok = false
		}
	}
	for k := range b {
		if _, found := a[k]; !found {
			t.Errorf("%s unexpected", k)
			ok = false
		}
	}
	return ok
}

func describe(e entry) string {
	return fmt.Sprintf("mode %o owner %d:%d sum %x link %q", e.mode, e.uid, e.gid, e.sum[:4], e.link)
}
