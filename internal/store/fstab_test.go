package store

import (
	"os"
	"path/filepath"
	"testing"
)

// The fstab keeps every line dbfork did not write, in order; a user's
// marker and entry are added once and removed exactly.
func TestFstabEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fstab")
	before := "# static file system information\nUUID=1 / ext4 errors=remount-ro 0 1\n/swapfile none swap sw 0 0\n"
	if err := os.WriteFile(path, []byte(before), 0o640); err != nil {
		t.Fatal(err)
	}
	root, img := "/var/lib/dbfork-users/ann", "/var/lib/dbfork-users/ann.img"
	for i := 0; i < 2; i++ { // a second set replaces, never duplicates
		if _, err := fstabSet(path, "ann", root, fstabMarker("ann"), fstabEntry(img, root, "xfs")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fstabSet(path, "bob", "/var/lib/dbfork-users/bob", fstabMarker("bob"), fstabEntry("/var/lib/dbfork-users/bob.img", "/var/lib/dbfork-users/bob", "btrfs")); err != nil {
		t.Fatal(err)
	}
	want := before + fstabMarker("ann") + "\n" + img + " " + root + " xfs loop,nosuid,nodev,discard,nofail 0 0\n" +
		fstabMarker("bob") + "\n/var/lib/dbfork-users/bob.img /var/lib/dbfork-users/bob btrfs loop,nosuid,nodev,discard,nofail 0 0\n"
	if got, _ := os.ReadFile(path); string(got) != want {
		t.Fatalf("fstab:\n%s\nwant:\n%s", got, want)
	}
	if !fstabHas(path, root) || fstabHas(path, "/var/lib/dbfork-users/an") {
		t.Error("fstabHas matches the wrong entries")
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("fstab mode became %v", fi.Mode().Perm())
	}
	if changed, err := fstabSet(path, "ann", root); err != nil || !changed {
		t.Fatalf("remove ann: %v %v", changed, err)
	}
	if changed, err := fstabSet(path, "bob", "/var/lib/dbfork-users/bob"); err != nil || !changed {
		t.Fatalf("remove bob: %v %v", changed, err)
	}
	if got, _ := os.ReadFile(path); string(got) != before {
		t.Fatalf("fstab after removals:\n%s\nwant:\n%s", got, before)
	}
	if changed, _ := fstabSet(path, "ann", root); changed {
		t.Error("removing what is not there changed the fstab")
	}
}
