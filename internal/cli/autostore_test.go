package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// runAuto runs dbfork with the automatic store image allowed.
func (e *env) runAuto(args ...string) result {
	return e.runEnv([]string{"DBFORK_STORE_FS=auto"}, args...)
}

// unmountStoreAtEnd makes sure a test's loop-backed store goes away.
func (e *env) unmountStoreAtEnd() {
	e.t.Cleanup(func() {
		e.run("down", "--all")
		e.run("gc")
		_ = store.UnmountImage(e.store) // also gives the loop device its flushes back
	})
}

// mountOptions returns the mount options of the mount at dir.
func mountOptions(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command("findmnt", "-n", "-o", "OPTIONS", "--mountpoint", dir).Output()
	if err != nil {
		t.Fatalf("findmnt %s: %v", dir, err)
	}
	return strings.TrimSpace(string(out))
}

// A new store on ext4 puts itself on an XFS image (saying so once), where
// auto then takes a backend whose first writes are cheap; several
// processes creating it at once make one image; doctor shows it.
func TestStoreMakesItselfFast(t *testing.T) {
	testenv.RequireRoot(t)
	e := newEnv(t)
	if fs, _ := fsutil.FSType(e.root); fs == "xfs" || fs == "btrfs" {
		t.Fatalf("the test dir is on %s: this test needs a filesystem that cannot share extents", fs)
	}
	e.unmountStoreAtEnd()
	var wg sync.WaitGroup
	results := make([]result, 3)
	for i := range results {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = e.runAuto("ls") }()
	}
	wg.Wait()
	said := 0
	for _, r := range results {
		if r.code != 0 {
			t.Fatalf("ls on a new store: exit %d %q", r.code, r.stderr)
		}
		if strings.Contains(r.stderr, "XFS image") {
			said++
		}
	}
	if said != 1 {
		t.Fatalf("want one process to say it made the image, got %d: %+v", said, results)
	}
	if fs, _ := fsutil.FSType(e.store); fs != "xfs" {
		t.Fatalf("store is on %s, want its own xfs image", fs)
	}
	opts := mountOptions(t, e.store)
	for _, want := range []string{"nosuid", "nodev", "discard"} {
		if !strings.Contains(opts, want) {
			t.Errorf("store image mounted without %s: %s", want, opts)
		}
	}
	fi, err := os.Lstat(e.store + ".img")
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("image: %v %v", fi, err)
	}
	var doc struct {
		Store struct {
			LoopImage string `json:"loop_image"`
			LoopCache string `json:"loop_cache"`
		}
		Auto struct{ Backend string }
	}
	if err := json.Unmarshal([]byte(e.mustRun("doctor", "--json").stdout), &doc); err != nil {
		t.Fatal(err)
	}
	// The image's loop device drops cache flushes (store/attach.go).
	if doc.Store.LoopImage != e.store+".img" || doc.Store.LoopCache != "write through" || doc.Auto.Backend != "overlay" {
		t.Fatalf("doctor: %+v", doc)
	}
	// gc never unmounts the store itself; an existing store is left as is.
	e.mustRun("gc")
	if ok, _ := fsutil.IsMountpoint(e.store); !ok {
		t.Fatal("gc unmounted the store")
	}
	if r := e.runAuto("ls"); strings.Contains(r.stderr, "image") {
		t.Errorf("an existing store talked about images again: %q", r.stderr)
	}
}

// Where the disk cannot spare a useful image the store stays plain and
// says why; --fs plain and DBFORK_STORE_FS=plain opt out.
func TestStoreStaysPlain(t *testing.T) {
	testenv.RequireRoot(t)
	e := newEnv(t)
	small := filepath.Join(e.root, "small")
	if err := os.Mkdir(small, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1G", "tmpfs", small).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = fsutil.Unmount(small) })
	e.store = filepath.Join(small, "store")
	r := e.runAuto("ls")
	if r.code != 0 || !strings.Contains(r.stderr, "stays plain tmpfs") || !strings.Contains(r.stderr, "too little") {
		t.Fatalf("store on a small tmpfs: exit %d %q", r.code, r.stderr)
	}
	if fs, _ := fsutil.FSType(e.store); fs != "tmpfs" {
		t.Fatalf("store on %s", fs)
	}
	if _, err := os.Lstat(e.store + ".img"); !os.IsNotExist(err) {
		t.Fatalf("an image was left: %v", err)
	}

	e.store = filepath.Join(e.root, "plain")
	if r := e.runAuto("store", "init", "--fs", "plain"); r.code != 0 || !strings.Contains(r.stdout, "plain directory") {
		t.Fatalf("store init --fs plain: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := e.runAuto("ls"); r.code != 0 || strings.Contains(r.stderr, "image") {
		t.Fatalf("ls on a plain store: %d %q", r.code, r.stderr)
	}
	// A plain store is a dir where it is: as root on a nosuid,nodev bind
	// of itself (issue 29), never an image.
	if fs, _ := fsutil.FSType(e.store); fs == "xfs" || !store.PlainBound(e.store) || !strings.Contains(mountOptions(t, e.store), "nosuid") {
		t.Fatalf("a plain store is on %s (bound on itself: %v)", fs, store.PlainBound(e.store))
	}
	if r := e.runEnv([]string{"DBFORK_STORE_FS=xfs"}, "ls"); r.code != 2 || !strings.Contains(r.stderr, "DBFORK_STORE_FS") {
		t.Fatalf("bad DBFORK_STORE_FS: %d %q", r.code, r.stderr)
	}
}

// Without usable loop devices (a container without /dev/loop*) a new
// store stays plain and says why; a recorded image that is not a
// filesystem any more is one clear line, and nothing is mounted.
func TestStoreImageBadCases(t *testing.T) {
	testenv.RequireRoot(t)
	e := newEnv(t)
	// A private mount namespace whose loop devices are /dev/null.
	script := `for f in /dev/loop-control /dev/loop[0-9]*; do [ -e "$f" ] && mount --bind /dev/null "$f"; done; exec "$@"`
	c := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", bin, "--store", e.store, "ls")
	c.Env = append(os.Environ(), "DBFORK_STORE=", "DBFORK_STORE_FS=auto")
	out, err := c.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "stays plain") || !strings.Contains(string(out), "could not make an XFS image") {
		t.Fatalf("new store without loop devices: %v %s", err, out)
	}
	if _, err := os.Lstat(e.store + ".img"); !os.IsNotExist(err) {
		t.Fatalf("a failed image was left behind: %v", err)
	}
	if fs, _ := fsutil.FSType(e.store); fs == "xfs" {
		t.Fatal("store is on xfs")
	}

	e.store = filepath.Join(e.root, "broken")
	e.unmountStoreAtEnd()
	if r := e.runAuto("ls"); r.code != 0 {
		t.Fatalf("ls: %d %q", r.code, r.stderr)
	}
	e.mustRun("store", "umount")
	f, err := os.OpenFile(e.store+".img", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 64<<10), 0); err != nil { // the superblock
		t.Fatal(err)
	}
	f.Close()
	r := e.run("ls")
	if r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 || !strings.Contains(r.stderr, "mount") {
		t.Fatalf("ls on a broken image: exit %d %q", r.code, r.stderr)
	}
	if ok, _ := fsutil.IsMountpoint(e.store); ok {
		t.Fatal("a broken image is mounted")
	}
}
