package store_test

import (
	"bufio"
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

// mountsAt returns the per-mount options of every mount at dir, bottom
// first, read from /proc/self/mountinfo.
func mountsAt(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 5 && fields[4] == dir {
			out = append(out, fields[5])
		}
	}
	return out
}

func hasOpts(opts string, want ...string) bool {
	have := map[string]bool{}
	for _, o := range strings.Split(opts, ",") {
		have[o] = true
	}
	for _, w := range want {
		if !have[w] {
			return false
		}
	}
	return true
}

// Issue 29 (audit H1): as root, a plain store (one that stays a dir on
// the host's filesystem) is opened on a nosuid,nodev bind mount of itself,
// so a setuid file a test's SQL leaves in a clone does not elevate; the
// bind is made once however many processes open the store, an unfinished
// one is finished, and unmounting the store removes it.
func TestPlainStoreIsNoSuid(t *testing.T) {
	testenv.RequireRoot(t)
	base := testenv.Dir(t)
	if ok, _ := fsutil.NoSuidNoDev(base); ok {
		t.Fatalf("%s is nosuid,nodev already: the test needs a plain filesystem", base)
	}
	root := filepath.Join(base, "store")
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = store.Open(root) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	at := mountsAt(t, root)
	if len(at) != 1 || !hasOpts(at[0], "nosuid", "nodev") {
		t.Fatalf("plain store mounts at %s: %q, want one nosuid,nodev", root, at)
	}

	// A setuid-root program in a clone does not run as root.
	clone := filepath.Join(root, "instances", "x", "data")
	if err := os.MkdirAll(clone, 0o755); err != nil {
		t.Fatal(err)
	}
	id := filepath.Join(clone, "id")
	bin, err := os.ReadFile("/usr/bin/id")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(id, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(id, os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", id, "-u").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "65534" {
		t.Fatalf("setuid-root program in a plain store's clone ran as %q (%v)", out, err)
	}
	if err := os.RemoveAll(filepath.Join(root, "instances", "x")); err != nil {
		t.Fatal(err)
	}

	// Opening again stacks nothing; unmounting the store (`store umount`)
	// removes the bind, and the next open makes it again.
	if _, err := store.Open(root); err != nil {
		t.Fatal(err)
	}
	if at := mountsAt(t, root); len(at) != 1 || !store.PlainBound(root) {
		t.Fatalf("after a second open: %q (bound %v)", at, store.PlainBound(root))
	}
	if err := store.UnmountImage(root); err != nil {
		t.Fatal(err)
	}
	if at := mountsAt(t, root); len(at) != 0 || store.PlainBound(root) {
		t.Fatalf("after unmounting: %q", at)
	}

	// A bind left without its flags (a crash between the two mount
	// calls) is finished, not stacked on.
	if out, err := exec.Command("mount", "--bind", root, root).CombinedOutput(); err != nil {
		t.Fatalf("mount --bind: %v %s", err, out)
	}
	if _, err := store.Open(root); err != nil {
		t.Fatal(err)
	}
	if at := mountsAt(t, root); len(at) != 1 || !hasOpts(at[0], "nosuid", "nodev") {
		t.Fatalf("after a crash between bind and remount: %q", at)
	}
	if err := store.UnmountImage(root); err != nil {
		t.Fatal(err)
	}
	if at := mountsAt(t, root); len(at) != 0 {
		t.Fatalf("left mounted: %q", at)
	}

	// A store on a filesystem that is nosuid,nodev already needs nothing.
	tmpfs := filepath.Join(base, "tmpfs")
	if err := os.Mkdir(tmpfs, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "nosuid,nodev,size=16m,mode=755", "tmpfs", tmpfs).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = fsutil.Unmount(tmpfs) })
	if _, err := store.Open(filepath.Join(tmpfs, "store")); err != nil {
		t.Fatal(err)
	}
	if at := mountsAt(t, filepath.Join(tmpfs, "store")); len(at) != 0 {
		t.Fatalf("a store on a nosuid,nodev tmpfs was bound: %q", at)
	}
}
