package mysql

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// fcrc32Page makes a valid full_crc32 page with random contents written at
// lsn (0: a page never written, all zero).
func fcrc32Page(rng *rand.Rand, lsn uint64) []byte {
	pg := make([]byte, pageSize)
	if lsn == 0 {
		return pg
	}
	rng.Read(pg)
	binary.BigEndian.PutUint32(pg[filPageKeyVersion:], 0)
	binary.BigEndian.PutUint16(pg[filPageType:], pageTypeIndex)
	binary.BigEndian.PutUint64(pg[filPageLSN:], lsn)
	binary.BigEndian.PutUint32(pg[pageSize-8:], uint32(lsn))
	binary.BigEndian.PutUint32(pg[pageSize-4:], crc32.Checksum(pg[:pageSize-4], castagnoli))
	return pg
}

func TestStampPage(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	pg := fcrc32Page(rng, 987654321)
	body := bytes.Clone(pg[24 : pageSize-8])
	if !stampPage(pg, nil) || binary.BigEndian.Uint64(pg[filPageLSN:]) != stampLSN || !validPage(pg) {
		t.Fatal("a valid page was not stamped into a valid page")
	}
	if !bytes.Equal(body, pg[24:pageSize-8]) {
		t.Fatal("stamping changed what the page holds")
	}
	if stampPage(pg, nil) {
		t.Fatal("a stamped page was stamped again")
	}
	bad := fcrc32Page(rng, 987654321)
	bad[100] ^= 1
	encrypted := fcrc32Page(rng, 987654321)
	binary.BigEndian.PutUint32(encrypted[0:], 7) // FIL_PAGE_FCRC32_KEY_VERSION
	binary.BigEndian.PutUint32(encrypted[pageSize-4:], crc32.Checksum(encrypted[:pageSize-4], castagnoli))
	rtree := fcrc32Page(rng, 987654321)
	binary.BigEndian.PutUint16(rtree[filPageType:], pageTypeRtree)
	binary.BigEndian.PutUint32(rtree[pageSize-4:], crc32.Checksum(rtree[:pageSize-4], castagnoli))
	for name, p := range map[string][]byte{"never written": fcrc32Page(rng, 0), "bad checksum": bad, "encrypted": encrypted, "R-tree": rtree, "below the stamp": fcrc32Page(rng, 100)} {
		before := bytes.Clone(p)
		if stampPage(p, nil) || !bytes.Equal(before, p) {
			t.Errorf("%s page was changed", name)
		}
	}
}

// stampTablespace writes back only the pages it stamps (the holes of
// pages never written stay holes) and leaves tablespaces of other formats
// alone.
func TestStampTablespace(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	dir := t.TempDir()
	page0 := fcrc32Page(rng, 5000000)
	copy(page0[cryptDataOffset:], "nocrypt")
	binary.BigEndian.PutUint32(page0[fspSpaceFlags:], fcrc32Flags16K)
	binary.BigEndian.PutUint32(page0[pageSize-4:], crc32.Checksum(page0[:pageSize-4], castagnoli))
	// 70 pages: more than one 64-page chunk; pages 3 and 66 never written.
	var file []byte
	for p := 0; p < 70; p++ {
		switch p {
		case 0:
			file = append(file, page0...)
		case 3, 66:
			file = append(file, fcrc32Page(rng, 0)...)
		default:
			file = append(file, fcrc32Page(rng, uint64(5000000+p))...)
		}
	}
	path := filepath.Join(dir, "t.ibd")
	writeSparse(t, path, file)
	blocks := allocated(t, path)
	pages, kept, ok, err := stampTablespace(path, new(*rowLayout))
	if err != nil || !ok || pages != 68 || kept != 2 {
		t.Fatalf("stamped %d, kept %d, ok %v, err %v; want 68, 2, true", pages, kept, ok, err)
	}
	if after := allocated(t, path); after != blocks {
		t.Errorf("stamping changed the blocks the file owns: %d, was %d (holes filled?)", after, blocks)
	}
	got, _ := os.ReadFile(path)
	for p := 0; p < 70; p++ {
		pg := got[p*pageSize : (p+1)*pageSize]
		lsn := binary.BigEndian.Uint64(pg[filPageLSN:])
		if (p == 3 || p == 66) != (lsn == 0) || (lsn != 0 && (lsn != stampLSN || !validPage(pg))) {
			t.Fatalf("page %d: LSN %d, valid %v", p, lsn, validPage(pg))
		}
	}

	other := bytes.Clone(file)
	binary.BigEndian.PutUint32(other[fspSpaceFlags:], 0x21) // crc32 of before 10.5, 16 KiB
	for name, f := range map[string][]byte{"other.ibd": other, "short.ibd": file[:100]} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, f, 0o600); err != nil {
			t.Fatal(err)
		}
		if pages, _, ok, err := stampTablespace(p, new(*rowLayout)); err != nil || ok || pages != 0 {
			t.Errorf("%s: stamped %d pages (ok %v, err %v), want it left alone", name, pages, ok, err)
		}
		if back, _ := os.ReadFile(p); !bytes.Equal(back, f) {
			t.Errorf("%s changed", name)
		}
	}
}

// writeSparse writes data leaving its all-zero pages as holes.
func writeSparse(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zero := make([]byte, pageSize)
	for off := 0; off < len(data); off += pageSize {
		if pg := data[off : off+pageSize]; !bytes.Equal(pg, zero) {
			if _, err := f.WriteAt(pg, int64(off)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		t.Fatal(err)
	}
}

func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks
}
