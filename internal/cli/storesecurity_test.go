package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/testenv"
)

// mkImage makes an XFS image at img, as root, for the attacks below.
func mkImage(t *testing.T, img string) {
	t.Helper()
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Truncate(400 << 20)
	f.Close()
	if out, err := exec.Command("mkfs.xfs", "-q", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs: %v %s", err, out)
	}
}

// Issue 12 C1: as root, dbfork never mounts an image another user could
// have made (a setuid shell on it would be root's), nor one it did not
// record as its own, nor uses a store path someone else could swap; the
// image it does mount is nosuid,nodev.
func TestStoreImageNotFromOthers(t *testing.T) {
	testenv.RequireRoot(t)
	e := newEnv(t)
	e.store = filepath.Join(e.root, "x")
	img := e.store + ".img"
	mkImage(t, img)

	// Another user's image (here: root made it, then gave it away).
	if err := os.Chown(img, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	r := e.run("ls")
	if r.code != 2 || !strings.Contains(r.stderr, "belongs to uid 65534") {
		t.Fatalf("ls with another user's image: exit %d %q", r.code, r.stderr)
	}
	if ok, _ := fsutil.IsMountpoint(e.store); ok {
		t.Fatal("another user's image was mounted")
	}

	// Root's, but not recorded by dbfork: refused, with how to adopt it.
	if err := os.Chown(img, 0, 0); err != nil {
		t.Fatal(err)
	}
	r = e.run("ls")
	if r.code != 2 || !strings.Contains(r.stderr, "store mount") {
		t.Fatalf("ls with an unrecorded image: exit %d %q", r.code, r.stderr)
	}
	if ok, _ := fsutil.IsMountpoint(e.store); ok {
		t.Fatal("an unrecorded image was mounted")
	}
	t.Cleanup(func() { _ = fsutil.Unmount(e.store) })
	e.mustRun("store", "mount")
	if opts := mountOptions(t, e.store); !strings.Contains(opts, "nosuid") || !strings.Contains(opts, "nodev") {
		t.Fatalf("store image mounted with %s", opts)
	}
	// A setuid-root binary on the image does not give root.
	id := filepath.Join(e.store, "id")
	data, err := os.ReadFile("/usr/bin/id")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(id, data, 0o4755); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(id, 0o4755)
	out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", id, "-u").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) == "0" {
		t.Fatalf("setuid binary on the store image ran as %q (%v)", out, err)
	}
	_ = os.Remove(id)
	e.mustRun("store", "umount")
	// Recorded now: the next command remounts it on demand.
	e.mustRun("ls")
	if ok, _ := fsutil.IsMountpoint(e.store); !ok {
		t.Fatal("the adopted image was not remounted on demand")
	}
}

// Store paths with a symlink, or a component others may write, are
// refused as root.
func TestStorePathOthersCouldChange(t *testing.T) {
	testenv.RequireRoot(t)
	e := newEnv(t)
	real := filepath.Join(e.root, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(e.root, "link")); err != nil {
		t.Fatal(err)
	}
	e.store = filepath.Join(e.root, "link", "store")
	if r := e.run("ls"); r.code != 2 || !strings.Contains(r.stderr, "is a symlink") {
		t.Fatalf("store under a symlink: exit %d %q", r.code, r.stderr)
	}
	open := filepath.Join(e.root, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(open, 0o777)
	e.store = filepath.Join(open, "store")
	if r := e.run("ls"); r.code != 2 || !strings.Contains(r.stderr, "writable by group or others") {
		t.Fatalf("store under a world-writable dir: exit %d %q", r.code, r.stderr)
	}
	if _, err := os.Lstat(e.store); !os.IsNotExist(err) {
		t.Fatalf("a refused store was created: %v", err)
	}
	mine := filepath.Join(e.root, "mine")
	if err := os.Mkdir(mine, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Chown(mine, 65534, 65534)
	e.store = filepath.Join(mine, "store")
	if r := e.run("ls"); r.code != 2 || !strings.Contains(r.stderr, "not root") {
		t.Fatalf("store under another user's dir: exit %d %q", r.code, r.stderr)
	}
}
