package oci

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/engine/engines"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/oci/ocitest"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// testLargeFile makes the test's table files layers of their own.
const testLargeFile = 256 << 10

const twoTables = `
engine = "postgres"
database = "shop"
owner = "shop"
# VACUUM FREEZE at the end of a build would stamp every page of big with a
# WAL position that depends on what was loaded after it (docs/oci.md).
freeze = false
[[load]]
sql = "big.sql"
[[load]]
sql = "small.sql"
`

func buildGolden(t *testing.T, s *store.Store, proj string, smallRows int) *golden.Golden {
	t.Helper()
	return buildRecipe(t, s, proj, twoTables, map[string]string{
		"big.sql":   "create table big(id int primary key, pad text);\ninsert into big select g, repeat('x', 100) from generate_series(1, 20000) g;\n",
		"small.sql": "create table small(id int);\ninsert into small select generate_series(1, " + strconv.Itoa(smallRows) + ");\n",
	})
}

// buildRecipe writes a recipe (and its files) to proj and builds its
// golden in s with the engine it names.
func buildRecipe(t *testing.T, s *store.Store, proj, toml string, files map[string]string) *golden.Golden {
	t.Helper()
	r, err := recipe.Load(testenv.WriteRecipe(t, proj, toml, files))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engines.Open(context.Background(), golden.EngineWant(r))
	if err != nil {
		t.Fatal(err)
	}
	res, err := golden.Build(context.Background(), s, eng, r, golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Golden
}

func newStore(t *testing.T, root, name string) *store.Store {
	t.Helper()
	s, err := store.Open(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func assertNoGolden(t *testing.T, s *store.Store) {
	t.Helper()
	if gs, _ := golden.List(s); len(gs) > 0 {
		t.Errorf("store %s holds %d goldens, want none", s.Root, len(gs))
	}
	if left := testenv.TmpBuilds(s.Root); len(left) > 0 {
		t.Errorf("work dirs left: %v", left)
	}
}

func verifyFull(t *testing.T, g *golden.Golden) {
	t.Helper()
	probs, err := golden.Verify(g, true)
	if err != nil || len(probs) > 0 {
		t.Fatalf("pulled golden does not verify: %v %v", err, probs)
	}
}

// Push from store A, pull into an empty store B, export/import into C;
// a second push of the same golden sends no layer; after one seed file
// changes, only layers holding changed files are sent.
func TestPushPullExportImport(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	root := testenv.Dir(t)
	reg := ocitest.Start(t, ocitest.Options{})
	repo := reg.Host + "/goldens/shop"
	a := newStore(t, root, "a")
	g1 := buildGolden(t, a, filepath.Join(root, "proj"), 100)
	po := PackOptions{LargeFile: testLargeFile}

	st, err := Push(ctx, a, g1, repo, []string{"latest"}, Registry{}, po)
	if err != nil {
		t.Fatal(err)
	}
	if st.LayersSent != st.Layers || st.BytesSent < st.Compressed || st.Layers < 3 {
		t.Fatalf("first push: %+v", st)
	}
	again, err := Push(ctx, a, g1, repo, nil, Registry{}, po)
	if err != nil {
		t.Fatal(err)
	}
	if again.LayersSent != 0 || again.Manifest.Digest != st.Manifest.Digest {
		t.Fatalf("second push of the same golden sent %d layers (manifest %s, first %s)", again.LayersSent, again.Manifest.Digest, st.Manifest.Digest)
	}

	b := newStore(t, root, "b")
	res, err := Pull(ctx, b, repo+":latest", Registry{}, UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Downloaded || res.Key != g1.Key {
		t.Fatalf("pull: %+v", res)
	}
	verifyFull(t, res.Golden)
	if again, err := Pull(ctx, b, repo+"@"+st.Manifest.Digest.String(), Registry{}, UnpackOptions{}); err != nil || again.Downloaded {
		t.Fatalf("second pull by digest: downloaded=%v err=%v", again != nil && again.Downloaded, err)
	}

	file := filepath.Join(root, "golden.tar")
	if _, err := Export(ctx, a, g1, file, po); err != nil {
		t.Fatal(err)
	}
	c := newStore(t, root, "c")
	imp, err := Import(ctx, c, file, UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if imp.Key != g1.Key || imp.Manifest != st.Manifest.Digest.String() {
		t.Fatalf("import gave %s (%s), want the pushed artifact %s (%s)", imp.Key, imp.Manifest, g1.Key, st.Manifest.Digest)
	}
	verifyFull(t, imp.Golden)

	// One seed file changes.
	g2 := buildGolden(t, a, filepath.Join(root, "proj"), 150)
	if g2.Key == g1.Key {
		t.Fatal("changed seed kept the key")
	}
	st2, err := Push(ctx, a, g2, repo, nil, Registry{}, po)
	if err != nil {
		t.Fatal(err)
	}
	old := onlyChangedLayersSent(t, reg, g1, g2, st2)
	t.Logf("one-table change: sent %d of %d layers, %d of %d bytes", st2.LayersSent, st2.Layers, st2.BytesSent, st2.Compressed)
	// The big table, loaded before the changed one, is byte-identical in
	// both goldens (build servers run with settings that keep WAL
	// positions out of pages loaded in their creating transaction), so
	// its layer is shared.
	var biggest golden.File
	for _, f := range filesOf(t, g2.Manifest) {
		if f.Size > biggest.Size {
			biggest = f
		}
	}
	if old[biggest.Path] != biggest.SHA256 {
		t.Errorf("the unchanged big table's file %s (%d bytes) differs between the goldens", biggest.Path, biggest.Size)
	}
	res2, err := Pull(ctx, b, repo+":"+g2.Key, Registry{}, UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	verifyFull(t, res2.Golden)
}

func blobIn(reg *ocitest.Registry, digest string) bool {
	_, err := os.Stat(reg.BlobPath(digest))
	return err == nil
}

// A blob changed in the registry's storage: the pull is refused and
// nothing is published or left behind.
func TestCorruptBlobRefused(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	root := testenv.Dir(t)
	reg := ocitest.Start(t, ocitest.Options{})
	repo := reg.Host + "/goldens/shop"
	a := newStore(t, root, "a")
	g := buildGolden(t, a, filepath.Join(root, "proj"), 100)
	st, err := Push(ctx, a, g, repo, nil, Registry{}, PackOptions{LargeFile: testLargeFile})
	if err != nil {
		t.Fatal(err)
	}
	// Flip bytes in the middle of the biggest layer, keeping its size.
	var biggest string
	var size int64
	for _, d := range st.SentLayers {
		if fi, err := os.Stat(reg.BlobPath(d)); err == nil && fi.Size() > size {
			biggest, size = d, fi.Size()
		}
	}
	f, err := os.OpenFile(reg.BlobPath(biggest), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("corrupt!"), size/2); err != nil {
		t.Fatal(err)
	}
	f.Close()

	b := newStore(t, root, "b")
	_, err = Pull(ctx, b, repo+":"+g.Key, Registry{}, UnpackOptions{})
	if err == nil {
		t.Fatal("pull of a corrupt blob succeeded")
	}
	if !strings.Contains(err.Error(), "corrupt") && !strings.Contains(err.Error(), "digest") {
		t.Errorf("error does not say the blob is corrupt: %v", err)
	}
	t.Logf("refused: %v", err)
	assertNoGolden(t, b)
}

// Wrong or missing credentials give one line naming the registry and
// what to check; the right ones work.
func TestRegistryCredentials(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	root := testenv.Dir(t)
	reg := ocitest.Start(t, ocitest.Options{User: "ci", Password: "s3cret"})
	repo := reg.Host + "/goldens/shop"
	a := newStore(t, root, "a")
	g := buildGolden(t, a, filepath.Join(root, "proj"), 100)
	for name, r := range map[string]Registry{"wrong": {Username: "ci", Password: "nope", CredentialHosts: []string{reg.Host}}, "none": {}} {
		_, err := Push(ctx, a, g, repo, nil, r, PackOptions{})
		if err == nil {
			t.Fatalf("%s credentials: push succeeded", name)
		}
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "refused access") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s credentials: %v", name, err)
		}
	}
	// A docker config.json with the right auth works too.
	cfg := filepath.Join(root, "docker", "config.json")
	_ = os.MkdirAll(filepath.Dir(cfg), 0o700)
	auth := "Y2k6czNjcmV0" // base64("ci:s3cret")
	if err := os.WriteFile(cfg, []byte(`{"auths":{"`+reg.Host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Push(ctx, a, g, repo, nil, Registry{DockerConfig: cfg}, PackOptions{}); err != nil {
		t.Fatal(err)
	}
	b := newStore(t, root, "b")
	if _, err := Pull(ctx, b, repo+":"+g.Key, Registry{Username: "ci", Password: "bad", CredentialHosts: []string{reg.Host}}, UnpackOptions{}); err == nil || !strings.Contains(err.Error(), "refused access") {
		t.Errorf("pull with a wrong password: %v", err)
	}
	assertNoGolden(t, b)
	if _, err := Pull(ctx, b, repo+":"+g.Key, Registry{Username: "ci", Password: "s3cret", CredentialHosts: []string{reg.Host}}, UnpackOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Two pulls of one key at once download it once; a golden whose engine
// does not match is refused before anything is downloaded.
func TestConcurrentPullsAndEngineCheck(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	root := testenv.Dir(t)
	reg := ocitest.Start(t, ocitest.Options{})
	repo := reg.Host + "/goldens/shop"
	a := newStore(t, root, "a")
	g := buildGolden(t, a, filepath.Join(root, "proj"), 100)
	if _, err := Push(ctx, a, g, repo, nil, Registry{}, PackOptions{}); err != nil {
		t.Fatal(err)
	}
	b := newStore(t, root, "b")
	refuse := func(context.Context, string, string) (engine.Engine, error) {
		return nil, errs.Conflict("other server version")
	}
	if _, err := Pull(ctx, b, repo+":"+g.Key, Registry{}, UnpackOptions{Check: refuse}); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("engine check ignored: %v", err)
	}
	assertNoGolden(t, b)

	var wg sync.WaitGroup
	results := make([]*Unpacked, 4)
	errsOut := make([]error, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errsOut[i] = Pull(ctx, b, repo+":"+g.Key, Registry{}, UnpackOptions{})
		}()
	}
	wg.Wait()
	downloads := 0
	for i, r := range results {
		if errsOut[i] != nil {
			t.Fatal(errsOut[i])
		}
		if r.Downloaded {
			downloads++
		}
	}
	if downloads != 1 {
		t.Fatalf("%d of 4 concurrent pulls downloaded, want 1", downloads)
	}
	// Remote (a recipe's [cache]) says "not there" for a missing key.
	rm := &Remote{}
	ok, err := rm.Fetch(ctx, b, strings.Repeat("0", 64), repo)
	if ok || err != nil {
		t.Fatalf("fetch of a missing key: %v %v", ok, err)
	}
}

// onlyChangedLayersSent checks a push of g2 (st2) after g1's: no layer
// holding only files unchanged since g1 was sent, every other one is in
// the registry, and less than the whole artifact went. It returns g1's
// file digests by path.
func onlyChangedLayersSent(t *testing.T, reg *ocitest.Registry, g1, g2 *golden.Golden, st2 *Stats) map[string]string {
	t.Helper()
	ctx := context.Background()
	old := map[string]string{}
	for _, f := range filesOf(t, g1.Manifest) {
		old[f.Path] = f.SHA256
	}
	sent := map[string]bool{}
	for _, d := range st2.SentLayers {
		sent[d] = true
	}
	unchanged := 0
	for _, p := range planLayers(filesOf(t, g2.Manifest), testLargeFile) {
		var buf bytes.Buffer
		desc, err := writeLayer(ctx, g2.DataDir(), p, &buf)
		if err != nil {
			t.Fatal(err)
		}
		same := true
		for _, pc := range p.Pieces {
			same = same && old[pc.File.Path] == pc.File.SHA256
		}
		if same {
			unchanged++
			if sent[desc.Digest.String()] {
				t.Errorf("layer %s holds only unchanged files but was sent again", desc.Digest)
			}
		} else if !sent[desc.Digest.String()] && !blobIn(reg, desc.Digest.String()) {
			t.Errorf("layer %s with changed files is not in the registry", desc.Digest)
		}
	}
	if unchanged == 0 || st2.LayersSent == 0 || st2.LayersSent >= st2.Layers || st2.BytesSent >= st2.Compressed {
		t.Fatalf("after a one-file change: %d unchanged layers, sent %d of %d layers, %d of %d bytes",
			unchanged, st2.LayersSent, st2.Layers, st2.BytesSent, st2.Compressed)
	}
	return old
}

// A golden with slots holds its database 1+N times; the copies travel
// once: its artifact is about the size of the same golden's without
// slots, and the pulled golden has every slot, byte for byte.
func TestSlotsTravelOnce(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	root := testenv.Dir(t)
	reg := ocitest.Start(t, ocitest.Options{})
	a := newStore(t, root, "a")
	files := map[string]string{
		"big.sql":   "create table big(id int primary key, pad text);\ninsert into big select g, repeat('x', 100) from generate_series(1, 20000) g;\n",
		"small.sql": "create table small(id int);\ninsert into small select generate_series(1, 10);\n",
	}
	plain := buildRecipe(t, a, filepath.Join(root, "plain"), twoTables, files)
	slotted := buildRecipe(t, a, filepath.Join(root, "slots"), twoTables+"[fresh]\nslots = 4\n", files)
	if len(slotted.Manifest.Slots) != 4 || slotted.Manifest.TotalBytes < plain.Manifest.TotalBytes+4*(2<<20) {
		t.Fatalf("golden with slots: %d slots, %d bytes (without: %d)", len(slotted.Manifest.Slots), slotted.Manifest.TotalBytes, plain.Manifest.TotalBytes)
	}
	po := PackOptions{LargeFile: testLargeFile}
	stPlain, err := Push(ctx, a, plain, reg.Host+"/goldens/plain", []string{"latest"}, Registry{}, po)
	if err != nil {
		t.Fatal(err)
	}
	stSlots, err := Push(ctx, a, slotted, reg.Host+"/goldens/slots", []string{"latest"}, Registry{}, po)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("artifact without slots %d bytes, with 4 slots %d bytes", stPlain.Compressed, stSlots.Compressed)
	if stSlots.Compressed > stPlain.Compressed*105/100+64<<10 {
		t.Fatalf("artifact with 4 slots %d bytes, without %d: the copies travelled", stSlots.Compressed, stPlain.Compressed)
	}
	b := newStore(t, root, "b")
	res, err := Pull(ctx, b, reg.Host+"/goldens/slots:latest", Registry{}, UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Key != slotted.Key || len(res.Golden.Manifest.Slots) != 4 {
		t.Fatalf("pulled %s with %d slots", res.Key, len(res.Golden.Manifest.Slots))
	}
	verifyFull(t, res.Golden)
}
