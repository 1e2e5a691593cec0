package oci

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/oci/ocitest"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// A MariaDB golden after a change to the table loaded FIRST: the table
// loaded after it is byte-identical (the seal stamps page LSNs and resets
// transaction ids), so the push sends only the layers of what changed.
func TestMariaDBOneTableChange(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("mariadb"); err != nil {
		t.Skip("MariaDB is not installed (apt-get install mariadb-server); CI installs it")
	}
	ctx := context.Background()
	root := testenv.Dir(t)
	reg := ocitest.Start(t, ocitest.Options{})
	repo := reg.Host + "/goldens/maria"
	a := newStore(t, root, "a")
	po := PackOptions{LargeFile: testLargeFile}
	g1 := buildMariaDB(t, a, filepath.Join(root, "proj"), 1000)
	if _, err := Push(ctx, a, g1, repo, nil, Registry{}, po); err != nil {
		t.Fatal(err)
	}
	g2 := buildMariaDB(t, a, filepath.Join(root, "proj"), 1001)
	st2, err := Push(ctx, a, g2, repo, nil, Registry{}, po)
	if err != nil {
		t.Fatal(err)
	}
	old := onlyChangedLayersSent(t, reg, g1, g2, st2)
	for _, f := range filesOf(t, g2.Manifest) {
		if f.Path == filepath.Join("shop", "big.ibd") && old[f.Path] != f.SHA256 {
			t.Errorf("big.ibd, loaded after the changed table, differs between the goldens")
		}
	}
	t.Logf("one-table change: sent %d of %d layers, %d of %d bytes", st2.LayersSent, st2.Layers, st2.BytesSent, st2.Compressed)
	b := newStore(t, root, "b")
	res, err := Pull(ctx, b, repo+":"+g2.Key, Registry{}, UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	verifyFull(t, res.Golden)
}

// buildMariaDB loads small (rows rows, one INSERT each for the first
// and the rest) and then big (20,000 rows).
func buildMariaDB(t *testing.T, s *store.Store, proj string, rows int) *golden.Golden {
	t.Helper()
	return buildRecipe(t, s, proj, "engine = \"mariadb\"\ndatabase = \"shop\"\n[[load]]\nsql = [\"small.sql\", \"big.sql\"]\n", map[string]string{
		"small.sql": "CREATE TABLE small(id int PRIMARY KEY);\nINSERT INTO small VALUES (1);\nINSERT INTO small SELECT seq FROM seq_2_to_" + strconv.Itoa(rows) + ";\n",
		"big.sql":   "CREATE TABLE big(id int PRIMARY KEY, pad varchar(200) NOT NULL);\nINSERT INTO big SELECT seq, REPEAT('x', 100) FROM seq_1_to_20000;\n",
	})
}
