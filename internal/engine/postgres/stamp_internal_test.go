package postgres

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/dbfork/dbfork/internal/engine"
)

// heapPage lays out a heap page with one tuple per xmin; frozen ones carry
// HEAP_XMIN_FROZEN. lsn is its pd_lsn.
func heapPage(lsn uint64, xmins []uint32, frozen []bool) []byte {
	ne := binary.NativeEndian
	pg := make([]byte, blockSize)
	ne.PutUint32(pg[0:], uint32(lsn>>32))
	ne.PutUint32(pg[4:], uint32(lsn))
	upper := blockSize
	for i, x := range xmins {
		upper -= 32
		tup := pg[upper : upper+32]
		ne.PutUint32(tup[0:], x)
		ne.PutUint16(tup[18:], 2) // two attributes
		if frozen[i] {
			ne.PutUint16(tup[20:], xminFrozen)
		}
		tup[22] = 24 // t_hoff
		ne.PutUint32(pg[pageHeaderSize+4*i:], uint32(upper)|lpNormal<<15|32<<17)
	}
	ne.PutUint16(pg[pdLower:], uint16(pageHeaderSize+4*len(xmins)))
	ne.PutUint16(pg[pdUpper:], uint16(upper))
	ne.PutUint16(pg[pdSpecial:], blockSize)
	ne.PutUint16(pg[pdPagesizeVers:], blockSize|4)
	return pg
}

// The checksum matches PostgreSQL's: stamping a PostgreSQL 18 golden
// (data checksums on) first checks every page's stored checksum with it,
// and its pages were stamped (TestPostgresStableTableFiles, and by hand on
// an 18.6 golden: 8,794 of 8,794 pages verified). This pins the value for one
// synthetic page so the function cannot drift.
func TestPageChecksum(t *testing.T) {
	pg := make([]byte, blockSize)
	for i := range pg {
		pg[i] = byte(i * 7 % 251)
	}
	before := bytes.Clone(pg)
	got := [3]uint16{pageChecksum(pg, 0), pageChecksum(pg, 1), pageChecksum(pg, 131072)}
	if !bytes.Equal(before, pg) {
		t.Fatal("pageChecksum changed the page")
	}
	if got != pinnedChecksums {
		t.Fatalf("checksums %v, want %v", got, pinnedChecksums)
	}
	// pd_checksum itself is not part of the sum.
	binary.NativeEndian.PutUint16(pg[pdChecksum:], 0xBEEF)
	if c := pageChecksum(pg, 0); c != got[0] {
		t.Fatalf("checksum with pd_checksum set: %d, want %d", c, got[0])
	}
}

func TestStampPGPage(t *testing.T) {
	const ck = 50 << 20
	pg := heapPage(30<<20, []uint32{731, 732, 733}, []bool{true, false, true})
	binary.NativeEndian.PutUint16(pg[pdChecksum:], pageChecksum(pg, 9))
	changed, tuples := stampPGPage(pg, 9, kindHeap, ck)
	if !changed || tuples != 2 {
		t.Fatalf("stamped %v, %d tuples frozen; want true, 2", changed, tuples)
	}
	ne := binary.NativeEndian
	if lsn := uint64(ne.Uint32(pg[0:]))<<32 | uint64(ne.Uint32(pg[4:])); lsn != stampLSN {
		t.Fatalf("pd_lsn %#x, want %#x", lsn, stampLSN)
	}
	xmins := []uint32{ne.Uint32(pg[blockSize-32:]), ne.Uint32(pg[blockSize-64:]), ne.Uint32(pg[blockSize-96:])}
	if xmins[0] != frozenXID || xmins[1] != 732 || xmins[2] != frozenXID {
		t.Fatalf("xmins %v, want [2 732 2] (only frozen tuples)", xmins)
	}
	if ne.Uint16(pg[pdChecksum:]) != pageChecksum(pg, 9) {
		t.Fatal("checksum not recomputed")
	}
	if changed, _ := stampPGPage(pg, 9, kindHeap, ck); changed {
		t.Fatal("a stamped page changed again")
	}

	wrongSum := heapPage(30<<20, []uint32{731}, []bool{true})
	ne.PutUint16(wrongSum[pdChecksum:], pageChecksum(wrongSum, 9)+1)
	gist := heapPage(30<<20, nil, nil)
	ne.PutUint16(gist[pdSpecial:], blockSize-16)
	ne.PutUint16(gist[pdUpper:], blockSize-16)
	ne.PutUint16(gist[blockSize-2:], 0xFF81)
	future := heapPage(60<<20, []uint32{731}, []bool{true})
	notHeap := heapPage(30<<20, []uint32{731}, []bool{true})
	notHeap[blockSize-32+22] = 3 // no heap tuple header
	for name, p := range map[string][]byte{"checksum not matching": wrongSum, "GiST": gist, "new": make([]byte, blockSize), "past the checkpoint": future} {
		before := bytes.Clone(p)
		if changed, _ := stampPGPage(p, 9, kindHeap, ck); changed || !bytes.Equal(before, p) {
			t.Errorf("%s page changed", name)
		}
	}
	// A page whose items are not heap tuples keeps them; its LSN is stamped.
	if changed, tuples := stampPGPage(notHeap, 9, kindHeap, ck); !changed || tuples != 0 || ne.Uint32(notHeap[blockSize-32:]) != 731 {
		t.Errorf("non-heap items: changed %v, %d tuples frozen, xmin %d", changed, tuples, ne.Uint32(notHeap[blockSize-32:]))
	}
}

var pinnedChecksums = [3]uint16{44737, 44738, 44739}

// classify tells tables from B-trees by block 0 and skips the rest.
func TestClassify(t *testing.T) {
	ne := binary.NativeEndian
	withSpecial := func(size int, magic uint32) []byte {
		pg := heapPage(30<<20, nil, nil)
		ne.PutUint16(pg[pdSpecial:], uint16(blockSize-size))
		ne.PutUint16(pg[pdUpper:], uint16(blockSize-size))
		ne.PutUint32(pg[pageHeaderSize:], magic)
		return pg
	}
	dir := t.TempDir()
	for name, c := range map[string]struct {
		data []byte
		want relKind
	}{
		"heap":       {heapPage(30<<20, []uint32{5}, []bool{true}), kindHeap},
		"btree meta": {withSpecial(16, btreeMagic), kindBtree},
		"gist root":  {withSpecial(16, 0), kindSkip},
		"gin meta":   {withSpecial(8, 0), kindSkip},
		"new page":   {make([]byte, blockSize), kindSkip},
		"short":      {make([]byte, 100), kindSkip},
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if got := classify(path); got != c.want {
			t.Errorf("%s: classified %d, want %d", name, got, c.want)
		}
	}
	// A GiST page in a B-tree file is still refused page by page.
	gist := withSpecial(16, 0)
	ne.PutUint16(gist[blockSize-2:], 0xFF81)
	if changed, _ := stampPGPage(gist, 3, kindBtree, 50<<20); changed {
		t.Error("a page with GiST's page id was stamped as a B-tree page")
	}
}

// A stamped file carries its size and mtime; the next seal skips it while
// both hold (an intermediate golden's copy keeps them) and stamps it again
// once anything wrote to it.
func TestStampSkipsFilesNotWrittenSince(t *testing.T) {
	dir := t.TempDir()
	rel := filepath.Join(dir, "base", "5")
	if err := os.MkdirAll(rel, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(rel, "16384")
	page := heapPage(5<<20, []uint32{700}, []bool{true})
	if err := os.WriteFile(file, page, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := stampRelations(dir, 9<<20)
	if err != nil || st.Pages != 1 {
		t.Fatalf("first seal: %+v %v", st, err)
	}
	if !engine.StampedAlready(file) {
		t.Fatal("no stamp mark after stamping (user xattrs: tmpfs, ext4, XFS and btrfs keep them)")
	}
	// Unstamped bytes written back (as a server would): a new mtime.
	if err := os.WriteFile(file, page, 0o600); err != nil {
		t.Fatal(err)
	}
	if engine.StampedAlready(file) {
		t.Fatal("a file written after its stamp counts as stamped")
	}
	if st, err = stampRelations(dir, 9<<20); err != nil || st.Pages != 1 {
		t.Fatalf("seal after a write: %+v %v, want the page stamped again", st, err)
	}
	if st, err = stampRelations(dir, 9<<20); err != nil || st.Pages+st.Kept != 0 {
		t.Fatalf("seal of an unchanged file read it: %+v %v", st, err)
	}
}
