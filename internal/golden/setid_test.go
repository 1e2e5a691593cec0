package golden_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/testenv"
)

// evilRecipe is a recipe whose seed runs program as the build server's
// uid, in the data dir (audit H1 step 1).
func evilRecipe(t *testing.T, dir, program string) string {
	return testenv.WriteRecipe(t, dir, `
engine = "postgres"
database = "shop"

[[load]]
sql = ["evil.sql"]
`, map[string]string{
		"evil.sql": "create table items(id int);\nCOPY (SELECT 1) TO PROGRAM '" + program + "';\n",
	})
}

// Issue 29 (audit H1 step 1): a seed that makes a setuid copy of a program
// (and a setgid dir) in the data dir publishes a golden without any
// set-id bit: on disk, in the manifest, and so in every clone.
func TestBuildStripsSetIDBits(t *testing.T) {
	testenv.RequireRoot(t)
	s, pg, dir := setup(t)
	path := evilRecipe(t, filepath.Join(dir, "proj"), "cp /bin/true ./evil && chmod 4755 ./evil && chmod g+s ./evil && mkdir ./evildir && chmod 2755 ./evildir")
	res, err := golden.Build(context.Background(), s, pg, load(t, path), golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data := res.Golden.DataDir()
	fi, err := os.Lstat(filepath.Join(data, "evil"))
	if err != nil {
		t.Fatalf("the seed did not run (the test proves nothing): %v", err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != s.User.UID {
		t.Errorf("evil belongs to uid %d, want the server user's %d", uid, s.User.UID)
	}
	err = filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("published golden holds %s with mode %v", p, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range golden.FilesOf(t, res.Golden.Manifest) {
		if fs.FileMode(f.Mode)&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
			t.Errorf("manifest records %s with mode %v", f.Path, fs.FileMode(f.Mode))
		}
	}
	if probs, err := golden.Verify(res.Golden, true); err != nil || len(probs) > 0 {
		t.Fatalf("the golden does not match its manifest: %v %v", probs, err)
	}
}

// A seed that leaves a FIFO in the data dir (root would hang opening it)
// is refused with one line naming it, and nothing is published.
func TestBuildRefusesSpecialFiles(t *testing.T) {
	testenv.RequireRoot(t)
	s, pg, dir := setup(t)
	path := evilRecipe(t, filepath.Join(dir, "proj"), "mkfifo ./pipe")
	_, err := golden.Build(context.Background(), s, pg, load(t, path), golden.Options{})
	if err == nil {
		t.Fatal("a build that left a FIFO in the data dir was published")
	}
	if msg := err.Error(); !strings.Contains(msg, "pipe") || !strings.Contains(msg, "FIFO") || strings.Contains(msg, "\n") {
		t.Fatalf("error does not name the FIFO in one line: %q", msg)
	}
	if all, _ := golden.List(s); len(all) != 0 {
		t.Fatalf("%d goldens published", len(all))
	}
	if left := testenv.TmpBuilds(s.Root); len(left) != 0 {
		t.Fatalf("build dirs left: %v", left)
	}
}

// Issue 29 (audit H1): a golden that carries a setuid file with a
// manifest that says so (as goldens published before they were cleaned
// did, or one tampered with by hand) fails verify and is never cloned.
func TestSetIDGoldenIsRefused(t *testing.T) {
	testenv.RequireRoot(t)
	s, pg, dir := setup(t)
	res, err := golden.Build(context.Background(), s, pg, load(t, testenv.ShopRecipe(t, filepath.Join(dir, "proj"), 10)), golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := res.Golden
	target := filepath.Join(g.DataDir(), "PG_VERSION")
	if err := os.Chmod(target, fs.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(target)
	if err != nil || fi.Mode()&fs.ModeSetuid == 0 {
		t.Fatalf("could not make the golden's file setuid: %v %v", fi.Mode(), err)
	}
	files := golden.FilesOf(t, g.Manifest)
	for i := range files {
		if files[i].Path == "PG_VERSION" {
			files[i].Mode = uint32(fi.Mode())
		}
	}
	g.Manifest.SetFiles(files)
	mdata, err := json.MarshalIndent(g.Manifest, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g.Dir, golden.ManifestName), mdata, 0o644); err != nil {
		t.Fatal(err)
	}
	g, err = golden.Lookup(s, g.Key)
	if err != nil {
		t.Fatal(err)
	}
	probs, err := golden.Verify(g, true)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range probs {
		found = found || p.Path == "PG_VERSION" && strings.Contains(p.What, "set-user-id")
	}
	if !found {
		t.Fatalf("verify passed a golden with a setuid file: %v", probs)
	}
	if err := golden.CheckClonable(g); err == nil || !strings.Contains(err.Error(), "set-user-id") {
		t.Fatalf("a golden with a setuid file is clonable: %v", err)
	}
}
