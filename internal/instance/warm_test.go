package instance_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/testenv"
)

// A reflink clone is read once in the background after it is ready: by a
// process of the instance's own uid (a root-only file in the clone stays
// unread), without following a planted symlink or blocking on a fifo, and
// afterwards the clone's table files are in the page cache. Teardown ends
// it with the instance. An OverlayFS clone gets no reader.
func TestWarmInBackground(t *testing.T) {
	testenv.RequireRoot(t)
	root := testenv.LoopFS(t, "xfs", 700<<20)
	s, pg, g := buildShop(t, root)
	ctx := context.Background()
	in, err := instance.Create(ctx, s, pg, g, instance.Options{Backend: "reflink"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Destroy(context.Background(), s) })
	files, err := pg.TableFiles(ctx, in.State.Server, []string{"items"})
	if err != nil || len(files) == 0 {
		t.Fatalf("table files of items: %v %v", files, err)
	}
	table := "" // the largest: the heap (the others are its indexes, toast)
	var size int64
	for _, f := range files {
		if fi, err := os.Stat(filepath.Join(in.State.DataDir, f)); err == nil && fi.Size() > size {
			table, size = filepath.Join(in.State.DataDir, f), fi.Size()
		}
	}
	if err := syscall.Mkfifo(filepath.Join(in.State.DataDir, "planted-fifo"), 0o666); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(root, "outside")
	if err := os.WriteFile(outside, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(in.State.DataDir, "planted-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in.State.DataDir, "root-only"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	dropCache(t, table)
	if r := resident(t, table); r > 0.5 {
		t.Fatalf("%.0f%% of %s cached before the reader ran; cannot tell what it does", r*100, filepath.Base(table))
	}
	started, err := in.WarmInBackground(s)
	if err != nil || !started {
		t.Fatalf("WarmInBackground: %v %v", started, err)
	}
	var res struct {
		Files   int    `json:"files"`
		Bytes   int64  `json:"bytes"`
		Denied  int    `json:"denied"`
		Skipped string `json:"skipped"`
	}
	testenv.ReadJSONLine(t, filepath.Join(in.State.Dir, instance.WarmLog), &res)
	if res.Skipped != "" || res.Files < 100 || res.Bytes < g.Manifest.TotalBytes/2 {
		t.Errorf("reader: %+v, golden %d bytes", res, g.Manifest.TotalBytes)
	}
	if res.Denied != 1 {
		t.Errorf("reader could not read %d files, want 1 (the root-only one): did it run as the instance's uid?", res.Denied)
	}
	if r := resident(t, table); r < 0.9 {
		t.Errorf("only %.0f%% of %s cached after the reader ran", r*100, filepath.Base(table))
	}
	c := connect(t, in.State.Conn.URL)
	if n := count(t, c); n != 2001 {
		t.Errorf("%d rows after the reader ran", n)
	}
	if err := in.Destroy(ctx, s); err != nil {
		t.Fatal(err)
	}

	ov, err := instance.Create(ctx, s, pg, g, instance.Options{Backend: "overlay"})
	if err != nil {
		t.Fatal(err)
	}
	defer ov.Destroy(ctx, s)
	if started, err := ov.WarmInBackground(s); started || err != nil {
		t.Errorf("overlay clone: WarmInBackground started=%v err=%v, want neither", started, err)
	}
}

// dropCache evicts path's pages from the page cache.
func dropCache(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// resident is the fraction of path's pages in the page cache (mincore).
func resident(t *testing.T, path string) float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		t.Fatalf("%s: %v, size %d", path, err, fi.Size())
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	return float64(in) / float64(len(vec))
}
