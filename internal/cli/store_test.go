package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/testenv"
)

// `store init` makes a loop-backed store on which auto picks the cheap
// backend; after the store is unmounted (as by a reboot) the next command
// mounts it again.
func TestLoopBackedStores(t *testing.T) {
	testenv.RequireRoot(t)
	for _, c := range []struct{ fs, auto string }{{"btrfs", "btrfs"}, {"xfs", "overlay"}} {
		t.Run(c.fs, func(t *testing.T) {
			e := newEnv(t)
			e.store = filepath.Join(e.root, "loopstore")
			t.Cleanup(func() {
				e.run("down", "--all")
				_ = fsutil.Unmount(e.store)
			})
			r := e.mustRun("store", "init", "--fs", c.fs, "--size", "600M")
			if !strings.Contains(r.stdout, c.fs) {
				t.Fatalf("store init: %q", r.stdout)
			}
			if r := e.run("store", "init", "--fs", c.fs, "--size", "600M"); r.code == 0 {
				t.Fatal("a second store init over a live store succeeded")
			}
			var doc struct {
				Auto struct{ Backend string } `json:"auto"`
			}
			if err := json.Unmarshal([]byte(e.mustRun("doctor", "--json").stdout), &doc); err != nil || doc.Auto.Backend != c.auto {
				t.Fatalf("doctor on a %s store: auto %q, %v", c.fs, doc.Auto.Backend, err)
			}
			e.mustRun("build")
			e.mustRun("store", "umount")
			if ok, _ := fsutil.IsMountpoint(e.store); ok {
				t.Fatal("store still mounted after store umount")
			}
			// As after a reboot: the next command remounts the image.
			var inst struct{ ID, Backend string }
			if err := json.Unmarshal([]byte(e.mustRun("up", "--json").stdout), &inst); err != nil {
				t.Fatal(err)
			}
			if inst.Backend != c.auto {
				t.Fatalf("up on a %s store used %s, want %s", c.fs, inst.Backend, c.auto)
			}
			if r := e.run("store", "umount"); r.code != 5 {
				t.Fatalf("store umount with a live instance: exit %d %q", r.code, r.stderr)
			}
			e.mustRun("down", inst.ID)
			e.mustRun("store", "umount")
		})
	}
}

// Four dbfork processes building one key at once: one builds, the other
// waits and reuses it.
func TestConcurrentBuildProcesses(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	outs := make([]result, 4)
	for i := range outs {
		wg.Add(1)
		go func(i int) { defer wg.Done(); outs[i] = e.run("build", "--json") }(i)
	}
	wg.Wait()
	built := 0
	for _, o := range outs {
		var res struct {
			Key   string
			Built bool
		}
		if o.code != 0 || json.Unmarshal([]byte(o.stdout), &res) != nil {
			t.Fatalf("build: exit %d %q %q", o.code, o.stdout, o.stderr)
		}
		if res.Built {
			built++
		}
	}
	if built != 1 {
		t.Fatalf("%d processes built the same key, want 1", built)
	}
	entries, _ := os.ReadDir(filepath.Join(e.store, "goldens"))
	if len(entries) != 1 {
		t.Fatalf("goldens dir holds %d entries, want 1", len(entries))
	}
}
