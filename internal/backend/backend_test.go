package backend_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/backend/backendtest"
	"github.com/dbfork/dbfork/internal/proc"
	"github.com/dbfork/dbfork/internal/testenv"
)

// Each filesystem CI can make gets every backend that must work on it,
// and the backends that must not work are checked to say why.
//
// copied is how a golden's data dir is copied there (CopyDataDir): the
// golden side's backend where one holds the store's data dirs.
var matrix = []struct {
	fs      string
	works   []string
	refuses map[string]string // backend -> part of its probe error
	auto    string
	copied  string
}{
	{"host", []string{"overlay", "copy"}, map[string]string{"reflink": "cannot share extents", "btrfs": "not btrfs", "userns-overlay": "without root"}, "overlay", "copy"},
	{"xfs", []string{"reflink", "overlay", "copy"}, map[string]string{"btrfs": "not btrfs", "userns-overlay": "without root"}, "overlay", "reflink"},
	{"btrfs", []string{"btrfs", "reflink", "overlay", "copy"}, map[string]string{"userns-overlay": "without root"}, "btrfs", "btrfs"},
}

// Every backend in the table has its entry in both matrices, for every
// filesystem: it must work there or say why not.
func TestMatricesCoverTable(t *testing.T) {
	rows := map[string][]string{}
	for _, m := range matrix {
		rows["root "+m.fs] = append(slices.Clone(m.works), slices.Collect(maps.Keys(m.refuses))...)
	}
	for _, m := range userMatrix {
		rows["user "+m.fs] = append(slices.Clone(m.works), slices.Collect(maps.Keys(m.refuses))...)
	}
	for row, names := range rows {
		for _, n := range backend.Names {
			if !slices.Contains(names, n) {
				t.Errorf("backend %s has no entry in the %s row of the test matrix", n, row)
			}
		}
	}
}

func TestBackends(t *testing.T) {
	testenv.RequireRoot(t)
	for _, m := range matrix {
		t.Run(m.fs, func(t *testing.T) {
			root := testenv.Dir(t)
			if m.fs != "host" {
				root = testenv.LoopFS(t, m.fs, 512<<20)
			}
			if m.fs == "host" && hostFS(t, root) != "ext4" {
				t.Logf("host filesystem is %s, not ext4", hostFS(t, root))
			}
			for _, name := range m.works {
				t.Run(name, func(t *testing.T) {
					b, err := backend.Get(name)
					if err != nil {
						t.Fatal(err)
					}
					backendtest.Run(t, b, filepath.Join(root, name))
				})
			}
			for name, want := range m.refuses {
				b, _ := backend.Get(name)
				err := b.Probe(context.Background(), root)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s probe on %s: got %v, want an error containing %q", name, m.fs, err, want)
				}
			}
			golden := filepath.Join(root, "g")
			if err := backend.NewDataDir(golden); err != nil {
				t.Fatal(err)
			}
			b, why, err := backend.Select(context.Background(), "auto", root, golden)
			if err != nil {
				t.Fatal(err)
			}
			if b.Name() != m.auto || why == "" {
				t.Fatalf("auto chose %s (%q), want %s", b.Name(), why, m.auto)
			}
			checkGoldenSide(t, root, m.copied)
		})
	}
}

func TestSelectRejectsUnknownAndUnusable(t *testing.T) {
	if _, _, err := backend.Select(context.Background(), "zfs", t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "unknown backend") {
		t.Fatalf("got %v", err)
	}
	dir := testenv.Dir(t)
	_, _, err := backend.Select(context.Background(), "btrfs", dir, "")
	if err == nil || !strings.Contains(err.Error(), "does not work here") {
		t.Fatalf("btrfs on the host fs: got %v", err)
	}
}

func TestBtrfsNeedsSubvolumeGolden(t *testing.T) {
	root := testenv.LoopFS(t, "btrfs", 512<<20)
	plain := filepath.Join(root, "plain")
	if err := mkdirPlain(plain); err != nil {
		t.Fatal(err)
	}
	b, _, err := backend.Select(context.Background(), "auto", root, plain)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "overlay" {
		t.Fatalf("auto for a non-subvolume golden on btrfs chose %s, want overlay (copy-up by reflink)", b.Name())
	}
}

// gc removes the probe dirs of dead probers and leaves live ones alone.
func TestReapProbes(t *testing.T) {
	dir := t.TempDir()
	me, err := proc.Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, fmt.Sprintf(".probe-overlay-%d-%d-123", me.PID, me.StartTime))
	dead := filepath.Join(dir, fmt.Sprintf(".probe-overlay-%d-%d-456", me.PID, me.StartTime+1))
	other := filepath.Join(dir, "abcdef12")
	for _, d := range []string{live, dead, other} {
		if err := os.MkdirAll(filepath.Join(d, "upper"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got := backend.ReapProbes(dir)
	if len(got) != 1 || got[0] != dead {
		t.Fatalf("reaped %v, want only %s", got, dead)
	}
	for _, d := range []string{live, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
}

// Issue 12 C1: an overlay clone is mounted nosuid,nodev,noexec, so a
// setuid binary or device node the server user leaves in it is inert.
func TestOverlayMountFlags(t *testing.T) {
	testenv.RequireRoot(t)
	root := testenv.Dir(t)
	golden := filepath.Join(root, "g")
	if err := os.MkdirAll(golden, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := backend.Get("overlay")
	clone := filepath.Join(root, "c")
	if err := b.Prepare(context.Background(), golden, clone, filepath.Join(root, "s")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Remove(context.Background(), clone, filepath.Join(root, "s")) })
	out, err := exec.Command("findmnt", "-n", "-o", "OPTIONS", "--mountpoint", clone).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nosuid", "nodev", "noexec"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("overlay clone mounted without %s: %s", want, out)
		}
	}
}

// checkGoldenSide checks the golden data dir's life on the store at root:
// on btrfs the btrfs golden side makes it a subvolume that freezes
// read-only (root's writes included), thaws, copies by snapshot and is
// deleted frozen; elsewhere it is a plain dir that freezing leaves alone.
func checkGoldenSide(t *testing.T, root, copied string) {
	g := filepath.Join(root, "golden-side")
	if err := backend.NewDataDir(g); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(g); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("golden data dir: %v, %v, want mode 0700", fi, err)
	}
	write := func(p string) error { return os.WriteFile(filepath.Join(p, "f"), []byte("x"), 0o600) }
	if err := write(g); err != nil {
		t.Fatal(err)
	}
	onBtrfs := copied == "btrfs"
	if subvolume(t, g) != onBtrfs {
		t.Fatalf("golden data dir on %s is a subvolume: %v, want %v", hostFS(t, root), !onBtrfs, onBtrfs)
	}
	if err := backend.FreezeDataDir(g); err != nil {
		t.Fatal(err)
	}
	if err := write(g); (err != nil) != onBtrfs {
		t.Fatalf("write to a frozen golden data dir: %v (refused wanted: %v)", err, onBtrfs)
	}
	thawed, err := backend.ThawDataDir(g)
	if err != nil || thawed != onBtrfs {
		t.Fatalf("thaw: %v, %v, want %v", thawed, err, onBtrfs)
	}
	if err := write(g); err != nil {
		t.Fatalf("write to a thawed golden data dir: %v", err)
	}
	if err := backend.FreezeDataDir(g); err != nil {
		t.Fatal(err)
	}
	c := filepath.Join(root, "golden-side-copy")
	how, err := backend.CopyDataDir(g, c)
	if err != nil || how != copied {
		t.Fatalf("copy of the golden data dir: %q, %v, want %q", how, err, copied)
	}
	if subvolume(t, c) != onBtrfs {
		t.Fatalf("copy on %s is a subvolume: %v, want %v", hostFS(t, root), !onBtrfs, onBtrfs)
	}
	if err := write(c); err != nil {
		t.Fatalf("write to the copy of a frozen golden: %v", err)
	}
	for _, p := range []string{c, g} {
		if err := backend.RemoveDataDir(p); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Fatalf("%s left after RemoveDataDir: %v", p, err)
		}
	}
}

// subvolume tells a btrfs subvolume by what the kernel says of it: its
// root is always inode 256, on a btrfs filesystem.
func subvolume(t *testing.T, p string) bool {
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino == 256 && hostFS(t, p) == "btrfs"
}
