package fetch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/errs"
)

// workerUID stands for the uid that unpacked a tree (any uid but ours).
const workerUID = 2046820351

// tree makes an unpacked tree as a worker would leave it: every entry
// the worker's (as root), plus what bad adds.
func tree(t *testing.T, bad func(dir string)) string {
	dir := t.TempDir()
	for _, d := range []string{"bin", "lib"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "postgres"), []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lib", "libx.so.1"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("libx.so.1", filepath.Join(dir, "lib", "libx.so")); err != nil {
		t.Fatal(err)
	}
	if bad != nil {
		bad(dir)
	}
	uid := -1
	if os.Geteuid() == 0 {
		uid = workerUID
		_ = filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error {
			if filepath.Base(p) != "foreign" {
				_ = os.Lchown(p, uid, uid)
			}
			return nil
		})
	}
	// A chown clears set-id bits: the worker sets them last.
	if fi, err := os.Lstat(filepath.Join(dir, "bin", "evil")); err == nil && fi.Mode().IsRegular() {
		_ = syscall.Chmod(filepath.Join(dir, "bin", "evil"), 0o4755)
	}
	if err := adopt(dir, uid); bad == nil && err != nil {
		t.Fatal(err)
	} else if bad != nil {
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("adopted a tree it must refuse: %v", err)
		}
		return ""
	}
	return dir
}

// Root adopts what a worker unpacked through directory fds: the result is
// root's and writable by root alone; a link out, a set-id bit, a fifo, a
// device or an entry the worker did not make (a hard link to another's
// file) is refused, and root's chown and chmod never land outside.
func TestAdoptTree(t *testing.T) {
	dir := tree(t, nil)
	want := map[string]os.FileMode{".": 0o755 | os.ModeDir, "bin": 0o755 | os.ModeDir, "bin/postgres": 0o755, "lib/libx.so.1": 0o644}
	for rel, mode := range want {
		fi, err := os.Lstat(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
			t.Errorf("%s: mode %v uid %d", rel, fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
		}
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(string){
		"link out":     func(d string) { _ = os.Symlink(victim, filepath.Join(d, "bin", "evil")) },
		"relative out": func(d string) { _ = os.Symlink("../../x", filepath.Join(d, "bin", "evil")) },
		"setuid": func(d string) {
			_ = os.WriteFile(filepath.Join(d, "bin", "evil"), nil, 0o755)
		},
		"fifo":    func(d string) { _ = syscall.Mkfifo(filepath.Join(d, "bin", "evil"), 0o600) },
		"foreign": func(d string) { _ = os.Link(victim, filepath.Join(d, "lib", "foreign")) },
	} {
		if name == "foreign" && os.Geteuid() != 0 {
			continue
		}
		t.Run(name, func(t *testing.T) { tree(t, bad) })
		fi, err := os.Stat(victim)
		if err != nil || fi.Mode().Perm() != 0o600 || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
			t.Fatalf("%s: the victim outside the tree changed: %v %v", name, fi.Mode(), err)
		}
	}
}
