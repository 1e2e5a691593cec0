package cli_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/instance"
)

// inspect names the tables a test wrote and what their copy-up cost.
func TestInspect(t *testing.T) {
	e := newEnv(t)
	var up struct{ ID, DSN string }
	if err := json.Unmarshal([]byte(e.mustRun("up", "--json").stdout), &up); err != nil {
		t.Fatal(err)
	}
	var before instance.Usage
	if err := json.Unmarshal([]byte(e.mustRun("inspect", up.ID, "--json").stdout), &before); err != nil {
		t.Fatal(err)
	}
	for _, f := range before.Files {
		if f.Relation == "items" {
			t.Fatalf("items copied up before any write: %+v", f)
		}
	}
	if out, err := exec.Command("psql", up.DSN, "-Xqc", "update items set name = name || '!' where id < 10").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	var after instance.Usage
	if err := json.Unmarshal([]byte(e.mustRun("inspect", up.ID, "--json").stdout), &after); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range after.Files {
		if f.Relation == "items" {
			found = true
			// ext4: OverlayFS copied the whole table file up.
			if !f.CopiedUp || f.PrivateBytes < f.Size {
				t.Errorf("items: %+v", f)
			}
		}
	}
	if !found || after.PrivateBytes <= before.PrivateBytes || after.Backend != "overlay" {
		t.Fatalf("inspect after a write: %+v", after)
	}
	text := e.mustRun("inspect", up.ID[:4]).stdout
	if !strings.Contains(text, "copied up") || !strings.Contains(text, "items") {
		t.Errorf("inspect table: %s", text)
	}
	for _, bad := range [][]string{{"inspect"}, {"inspect", "zzzz"}, {"inspect", "a", "b"}} {
		if r := e.run(bad...); r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%v: exit %d %q", bad, r.code, r.stderr)
		}
	}
	e.mustRun("down", up.ID)
	e.assertNothingLeft()
}
