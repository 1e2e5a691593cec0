package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// Issue 29 (audit H1): as root, a plain store (DBFORK_STORE_FS=plain here)
// is used on a nosuid,nodev bind mount of itself; `store umount` removes
// it (refused while an instance lives) and the next command makes it
// again.
func TestPlainStoreNoSuidMount(t *testing.T) {
	testenv.RequireRoot(t)
	e := newEnv(t)
	e.mustRun("build")
	if !store.PlainBound(e.store) {
		t.Fatal("the plain store is not bound on itself")
	}
	if opts := mountOptions(t, e.store); !strings.Contains(opts, "nosuid") || !strings.Contains(opts, "nodev") {
		t.Fatalf("plain store mounted with %s", opts)
	}
	var up struct{ ID string }
	if err := json.Unmarshal([]byte(e.mustRun("up", "--json").stdout), &up); err != nil {
		t.Fatal(err)
	}
	if r := e.run("store", "umount"); r.code != 5 {
		t.Fatalf("store umount with a live instance: exit %d %q", r.code, r.stderr)
	}
	e.mustRun("down", up.ID)
	e.mustRun("store", "umount")
	if ok, _ := fsutil.IsMountpoint(e.store); ok {
		t.Fatal("plain store still mounted after store umount")
	}
	e.mustRun("ls")
	if !store.PlainBound(e.store) {
		t.Fatal("the next command did not bind the plain store again")
	}
}
