package instance_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/internal/engine/postgres"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// An instance that hands out no slots (`up`, `run` without the daemon)
// closes them: its server refuses every connection to a slot, before and
// after a reset, and the golden is checked without the slots' files, so
// damage there does not stop it, while it stops an instance whose slots
// are open. The database itself is served as ever.
func TestClosedSlots(t *testing.T) {
	root := testenv.Dir(t)
	s, err := store.Open(filepath.Join(root, "store"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pg, err := postgres.New(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	path := testenv.ShopRecipe(t, filepath.Join(root, "proj"), 200)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, "\n[fresh]\nslots = 2\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := recipe.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := golden.Build(ctx, s, pg, r, golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := res.Golden
	names, dirs := g.ClosableSlots()
	if !slices.Equal(names, []string{"slot_000", "slot_001"}) || len(dirs) != 2 {
		t.Fatalf("closable slots %v in %v", names, dirs)
	}
	// Damage a file of a slot, as a disk or a hand would.
	victim := ""
	files, err := g.Manifest.Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasPrefix(f.Path, dirs[1]+"/") && f.Size > 0 {
			victim = filepath.Join(g.DataDir(), f.Path)
			break
		}
	}
	if err := os.Truncate(victim, 1); err != nil {
		t.Fatal(err)
	}

	in, err := instance.Create(ctx, s, pg, g, instance.Options{Backend: "copy", CloseSlots: true})
	if err != nil {
		t.Fatalf("an instance with closed slots refused for damage in a slot: %v", err)
	}
	defer in.Destroy(ctx, s)
	if !slices.Equal(in.State.Closed, names) {
		t.Fatalf("instance records closed %v, want %v", in.State.Closed, names)
	}
	closedAsEver := func(when string) {
		t.Helper()
		c := connect(t, in.State.Conn.URL)
		var n int
		if err := c.QueryRow(ctx, "select count(*) from items").Scan(&n); err != nil || n != 201 {
			t.Fatalf("%s: the database itself: %d rows, %v", when, n, err)
		}
		c.Close(ctx)
		for _, name := range names {
			for _, url := range []string{in.State.Conn.URL, in.State.Conn.SocketURL} { // TCP and the socket
				url = strings.Replace(url, "/shop?", "/"+name+"?", 1)
				if c, err := pgx.Connect(ctx, url); err == nil {
					c.Close(ctx)
					t.Fatalf("%s: connected to closed slot %s (%s)", when, name, url)
				} else if !strings.Contains(err.Error(), "pg_hba.conf rejects") {
					t.Fatalf("%s: slot %s refused for another reason: %v", when, name, err)
				}
			}
		}
	}
	closedAsEver("new")
	if err := in.Reset(ctx, s, pg, g, nil); err != nil {
		t.Fatal(err)
	}
	closedAsEver("after a reset")

	// Slots open (the daemon's instances): the whole golden is checked.
	_, err = instance.Create(ctx, s, pg, g, instance.Options{Backend: "copy"})
	if !errors.Is(err, errs.ErrConflict) || !strings.Contains(err.Error(), "no longer matches its manifest") {
		t.Fatalf("an instance with open slots of a golden damaged in a slot: %v", err)
	}
}
