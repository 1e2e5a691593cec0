package backend_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/backend/backendtest"
	"github.com/dbfork/dbfork/internal/testenv"
)

// What an unprivileged user can have on each filesystem CI can make: the
// root test makes the filesystems (an ext4 dir, XFS and btrfs loops whose
// mount points the user owns) and runs TestBackendsAsUser as that user.
var userMatrix = []struct {
	fs      string
	works   []string
	refuses map[string]string
	auto    string
}{
	{"host", []string{"userns-overlay", "copy"}, map[string]string{"overlay": "needs root", "reflink": "cannot share extents", "btrfs": "not btrfs"}, "userns-overlay"},
	{"xfs", []string{"reflink", "userns-overlay", "copy"}, map[string]string{"overlay": "needs root", "btrfs": "not btrfs"}, "reflink"},
	{"btrfs", []string{"btrfs", "reflink", "userns-overlay", "copy"}, map[string]string{"overlay": "needs root"}, "btrfs"},
}

func TestBackendsRootless(t *testing.T) {
	if os.Geteuid() != 0 {
		backendsAsUser(t)
		return
	}
	dirs := map[string]string{"host": testenv.UserDir(t)}
	for _, fs := range []string{"xfs", "btrfs"} {
		mnt := testenv.LoopFS(t, fs, 512<<20)
		testenv.ChownToUser(t, mnt)
		dirs[fs] = mnt
	}
	arg, _ := json.Marshal(dirs)
	out := testenv.RunAsUser(t, "^TestBackendsRootless$", string(arg))
	for _, m := range userMatrix {
		for _, name := range m.works {
			want := "--- PASS: TestBackendsRootless/" + m.fs + "/" + name + " "
			if !strings.Contains(out, want) {
				t.Errorf("no %q in the unprivileged run:\n%s", want, out)
			}
		}
	}
	// The user's namespaces died with their processes: nothing of theirs
	// is mounted anywhere.
	for _, d := range dirs {
		testenv.AssertNoMountsAnywhere(t, d)
	}
}

// backendsAsUser is the unprivileged half: started by the root half with
// its filesystems, or run by a developer without root on what they have.
func backendsAsUser(t *testing.T) {
	dirs := testenv.UserDirs(t)
	ctx := context.Background()
	for _, m := range userMatrix {
		t.Run(m.fs, func(t *testing.T) {
			root := dirs[m.fs]
			if root == "" {
				t.Skipf("making a %s loop filesystem needs root; CI runs this test as root, which makes it and re-runs it as a user", m.fs)
			}
			for _, name := range m.works {
				t.Run(name, func(t *testing.T) {
					b, err := backend.Get(name)
					if err != nil {
						t.Fatal(err)
					}
					backendtest.Run(t, b, filepath.Join(root, name))
				})
			}
			for name, want := range m.refuses {
				b, _ := backend.Get(name)
				err := b.Probe(ctx, root)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s probe on %s as a user: got %v, want an error containing %q", name, m.fs, err, want)
				}
			}
			golden := filepath.Join(root, "g")
			if err := backend.NewDataDir(golden); err != nil {
				t.Fatal(err)
			}
			b, why, err := backend.Select(ctx, "auto", root, golden)
			if err != nil {
				t.Fatal(err)
			}
			if b.Name() != m.auto || why == "" {
				t.Fatalf("auto chose %s (%q), want %s", b.Name(), why, m.auto)
			}
			if err := backend.RemoveDataDir(golden); err != nil {
				t.Fatalf("remove golden dir as a user: %v", err)
			}
		})
	}
}
