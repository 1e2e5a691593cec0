package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// Issue 29 (audit H1): what may never be part of a golden — a device node,
// a FIFO, a socket, a set-id file, a hard link to a file elsewhere, a file
// of a foreign owner — is refused by the manifest and by the hand-over to
// the servers' group, with one line naming the entry. A build user cannot
// make a device node, so root makes one here.
func TestGoldenEntriesRefused(t *testing.T) {
	testenv.RequireRoot(t)
	u, err := store.ServerUser()
	if err != nil {
		t.Fatal(err)
	}
	base := testenv.Dir(t)
	for _, c := range []struct {
		name, want string
		make       func(p string) error
		listOK     bool // the manifest may record it (the hand-over refuses it)
	}{
		{"null", "character device", func(p string) error { return unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))) }, false},
		{"disk", "block device", func(p string) error { return unix.Mknod(p, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))) }, false},
		{"pipe", "FIFO", func(p string) error { return unix.Mkfifo(p, 0o600) }, false},
		{"sock", "socket", func(p string) error {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			return unix.Bind(fd, &unix.SockaddrUnix{Name: p})
		}, false},
		{"suid", "set-user-id", func(p string) error {
			if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
				return err
			}
			return os.Chmod(p, os.ModeSetuid|0o755)
		}, false},
		{"sgid", "set-group-id", func(p string) error { return os.Chmod(p, os.ModeSetgid|0o755) }, false},
		{"link", "hard links", func(p string) error {
			outside := filepath.Join(base, "outside-"+filepath.Base(filepath.Dir(p)))
			if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
				return err
			}
			return os.Link(outside, p)
		}, false},
		{"foreign", "belongs to uid 4242", func(p string) error {
			if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
				return err
			}
			return os.Chown(p, 4242, 4242)
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := filepath.Join(base, c.name, "data")
			if err := os.MkdirAll(filepath.Join(data, "base"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(data, "PG_VERSION"), []byte("18\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(data, "base", c.name)
			if c.name == "sgid" {
				p = filepath.Join(data, "base")
			}
			if err := c.make(p); err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(data, p)
			_, _, err := listFiles(data)
			if c.listOK {
				if err != nil {
					t.Fatalf("manifest: %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), rel) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("manifest of a data dir with %s: %v", c.want, err)
			}
			var st unix.Stat_t
			before := unix.Lstat(p, &st)
			err = shareTree(data, nil, u)
			if c.name == "suid" || c.name == "sgid" {
				// Set-id bits are stripped, not refused: the entry stays,
				// without them, and the manifest then takes it.
				if err != nil {
					t.Fatalf("hand-over: %v", err)
				}
				fi, err := os.Lstat(p)
				if err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					t.Fatalf("after the hand-over %s is %v (%v)", rel, fi.Mode(), err)
				}
				if _, _, err := listFiles(data); err != nil {
					t.Fatalf("manifest after stripping: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), rel) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("hand-over of a data dir with %s: %v", c.want, err)
			}
			var after unix.Stat_t
			if before == nil && unix.Lstat(p, &after) == nil && (after.Uid != st.Uid || after.Mode != st.Mode) {
				t.Fatalf("the refused entry was changed: owner %d mode %o, was %d %o", after.Uid, after.Mode, st.Uid, st.Mode)
			}
		})
	}
}

// A manifest entry (a pull's, before anything is written) naming a
// device, FIFO, socket or set-id file is refused; plain entries pass.
func TestCheckFileModes(t *testing.T) {
	for _, c := range []struct {
		mode os.FileMode
		want string
	}{
		{0o600, ""}, {os.ModeDir | 0o700, ""}, {os.ModeSymlink | 0o777, ""}, {os.ModeDir | os.ModeSticky | 0o700, ""},
		{os.ModeDevice | os.ModeCharDevice | 0o666, "character device"}, {os.ModeDevice | 0o600, "device"},
		{os.ModeNamedPipe | 0o600, "pipe"}, {os.ModeSocket | 0o600, "socket"},
		{os.ModeSetuid | 0o755, "set-user-id"}, {os.ModeSetgid | 0o755, "set-group-id"}, {os.ModeSticky | 0o644, "sticky"},
	} {
		err := CheckFile(File{Path: "base/1/x", Mode: uint32(c.mode)})
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "base/1/x")) {
			t.Errorf("mode %v: %v, want %q", c.mode, err, c.want)
		}
	}
}
