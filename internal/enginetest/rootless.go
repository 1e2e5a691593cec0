package enginetest

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/dbfork/dbfork/internal/testenv"
)

type fsCase struct {
	fs, auto string
	backends []string
}

// instanceMatrix is what instances are checked on: as root, overlay and
// copy on the host filesystem and XFS/btrfs loops the test makes; as the
// unprivileged user RunRootless starts, the backends that user can have
// on filesystems the root half made and gave to it.
func instanceMatrix(t *testing.T) ([]fsCase, func(*testing.T, string) string) {
	if arg := os.Getenv(testenv.AsUserEnv); arg != "" && os.Geteuid() != 0 {
		var dirs map[string]string
		if err := json.Unmarshal([]byte(arg), &dirs); err != nil {
			t.Fatal(err)
		}
		return []fsCase{
			{"host", "userns-overlay", []string{"userns-overlay", "copy"}},
			{"xfs", "reflink", []string{"reflink", "userns-overlay"}},
			{"btrfs", "btrfs", []string{"btrfs"}},
		}, func(t *testing.T, fs string) string { return dirs[fs] }
	}
	testenv.RequireRoot(t)
	return []fsCase{
			{"host", "overlay", []string{"overlay", "copy"}},
			{"xfs", "overlay", []string{"reflink", "overlay"}},
			{"btrfs", "btrfs", []string{"btrfs"}},
		}, func(t *testing.T, fs string) string {
			if fs == "host" {
				return testenv.Dir(t)
			}
			return testenv.LoopFS(t, fs, 900<<20)
		}
}

// RunRootless runs the test named run (a whole engine suite) again as an
// unprivileged user, with an ext4 dir and XFS and btrfs loops it owns.
func RunRootless(t *testing.T, run string) {
	testenv.RequireRoot(t)
	dirs := map[string]string{"host": testenv.UserDir(t)}
	for _, fs := range []string{"xfs", "btrfs"} {
		mnt := testenv.LoopFS(t, fs, 900<<20)
		testenv.ChownToUser(t, mnt)
		dirs[fs] = mnt
	}
	arg, _ := json.Marshal(dirs)
	out := testenv.RunAsUser(t, run, string(arg))
	t.Log(out)
	for _, d := range dirs {
		testenv.AssertNoMountsAnywhere(t, d)
		testenv.AssertClean(t, d)
	}
}
