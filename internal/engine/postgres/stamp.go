package postgres

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/fsutil"
)

// Page stamping. Every page PostgreSQL writes through the WAL carries the
// WAL position of its last change (pd_lsn), and every tuple the id of the
// transaction that inserted it (t_xmin, kept after freezing). A recipe
// that creates its tables first and loads them afterwards gets WAL-logged
// pages whose positions depend on all WAL before them, so even two builds
// of the same recipe differed in every table, and one more transaction
// before a table changed all its tuples (issue 15: a push re-sent them).
// After the clean shutdown no page needs its position: recovery only
// replays records after the last checkpoint, and a page claiming an
// older position than it has simply gets those records. So the seal
// stamps each page it understands with one fixed position, and the
// tuples VACUUM FREEZE froze get FrozenTransactionId as their raw xmin
// (what freezing wrote before PostgreSQL 9.4, still read as frozen);
// with data checksums on, the page checksum is recomputed. Only heap
// pages, the visibility map and free space map, and B-tree pages are
// stamped: GiST compares page positions with its split markers, and the
// other index types are left as they were.

const (
	blockSize  = 8192
	relSegSize = 131072 // blocks per segment file (1 GiB), the build default
	// stampLSN is below every real WAL position: WAL starts at segment
	// 1, and segments are at least 1 MiB.
	stampLSN = 1 << 20

	pdChecksum      = 8
	pdLower         = 12
	pdUpper         = 14
	pdSpecial       = 16
	pdPagesizeVers  = 18
	pageHeaderSize  = 24
	frozenXID       = 2
	xminFrozen      = 0x0300 // HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID
	lpNormal        = 1
	btreeMaxCycleID = 0xFF7F   // B-tree's last special field; other index AMs use 0xFF80 and up
	btreeMagic      = 0x053162 // first word of a B-tree's metapage (block 0) contents
)

// relKind is what a relation file holds, as far as stamping goes.
type relKind int

const (
	kindSkip  relKind = iota // not a file stamping understands
	kindHeap                 // a table: heap pages, tuples to freeze
	kindBtree                // a B-tree index (its block 0 is a B-tree metapage)
	kindMap                  // a visibility map or free space map fork
)

// relFile names a relation's segment files: RELFILENODE[_FORK][.SEGMENT].
var relFile = regexp.MustCompile(`^[0-9]+(_(fsm|vm|init))?(\.([0-9]+))?$`)

type stampStats struct{ Pages, Tuples, Kept int }

// stampRelations stamps the relation files under base/ and global/ of a
// cleanly shut down data dir whose last checkpoint is at checkpointLSN.
func stampRelations(dataDir string, checkpointLSN uint64) (stampStats, error) {
	var st stampStats
	if checkpointLSN <= stampLSN || binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		return st, nil // no position to stamp below; big-endian layouts not handled
	}
	// Stamped files by name and size: a file in the same blocks as one
	// of them (a slot's copy of its database's file, cloned or
	// deduplicated by the build) reads the same, stamped: it is marked,
	// not read.
	stamped := map[string][]string{}
	// twin marks path stamped when it shares its blocks with a stamped
	// file of its name and size (compare), and otherwise remembers it as
	// one (it is, or is about to be, stamped).
	twin := func(path, name string, compare bool) bool {
		fi, err := os.Lstat(path)
		if err != nil {
			return false
		}
		k := name + "/" + strconv.FormatInt(fi.Size(), 10)
		for _, t := range stamped[k] {
			if compare && fsutil.SameBlocksPath(t, path) {
				markStamped(path)
				return true
			}
		}
		if len(stamped[k]) < 3 {
			stamped[k] = append(stamped[k], path)
		}
		return false
	}
	for _, top := range []string{"base", "global"} {
		err := filepath.WalkDir(filepath.Join(dataDir, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			m := relFile.FindStringSubmatch(d.Name())
			if m == nil || !d.Type().IsRegular() {
				return nil
			}
			seg := 0
			if m[4] != "" {
				seg, _ = strconv.Atoi(m[4])
			}
			kind := kindMap
			if m[2] == "" || m[2] == "init" {
				// Segment 0's block 0 says what the relation is.
				first := path
				if m[3] != "" {
					first = filepath.Join(filepath.Dir(path), strings.TrimSuffix(d.Name(), m[3]))
				}
				kind = classify(first)
			}
			if kind == kindSkip {
				return nil
			}
			if engine.StampedAlready(path) {
				twin(path, d.Name(), false)
				return nil
			}
			if twin(path, d.Name(), true) {
				return nil
			}
			return stampRelationFile(path, uint32(seg*relSegSize), kind, checkpointLSN, &st)
		})
		if err != nil {
			return st, fmt.Errorf("stamp pages: %w", err)
		}
	}
	return st, nil
}

// stampRelationFile stamps one segment file in place, 1 MiB at a time,
// writing back only the pages it changed; firstBlock is the block number
// of its first page (checksums include it).
func stampRelationFile(path string, firstBlock uint32, kind relKind, checkpointLSN uint64, st *stampStats) error {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 128*blockSize)
	for off := int64(0); ; off += int64(len(buf)) {
		n, rerr := f.ReadAt(buf, off)
		if rerr != nil && rerr != io.EOF {
			return rerr
		}
		n -= n % blockSize
		run := -1
		for p := 0; p <= n/blockSize; p++ {
			changed := false
			if p < n/blockSize {
				blk := firstBlock + uint32(off/blockSize) + uint32(p)
				var tuples int
				changed, tuples = stampPGPage(buf[p*blockSize:(p+1)*blockSize], blk, kind, checkpointLSN)
				if changed {
					st.Pages++
					st.Tuples += tuples
				} else {
					st.Kept++
				}
			}
			if changed {
				if run < 0 {
					run = p
				}
				continue
			}
			if run >= 0 {
				if _, err := f.WriteAt(buf[run*blockSize:p*blockSize], off+int64(run*blockSize)); err != nil {
					return err
				}
				run = -1
			}
		}
		if rerr == io.EOF || n < len(buf) {
			break
		}
	}
	engine.MarkStamped(f)
	return f.Close()
}

// stampPGPage stamps one page of a relation file of kind if it is a page
// this code understands: a heap, visibility-map or free-space-map page
// (no special space) or a B-tree page, whose header adds up and whose
// checksum (if any) verifies. It returns whether it changed the page and
// how many tuples' xmin it set.
func stampPGPage(pg []byte, blk uint32, kind relKind, checkpointLSN uint64) (bool, int) {
	le := binary.NativeEndian
	lower, upper, special := int(le.Uint16(pg[pdLower:])), int(le.Uint16(pg[pdUpper:])), int(le.Uint16(pg[pdSpecial:]))
	if upper == 0 || int(le.Uint16(pg[pdPagesizeVers:]))&0xFF00 != blockSize || lower < pageHeaderSize || lower > upper || upper > special || special > blockSize {
		return false, 0 // new (all zero) or not a page we know
	}
	if kind == kindBtree {
		if blockSize-special != 16 || le.Uint16(pg[blockSize-2:]) > btreeMaxCycleID {
			return false, 0
		}
	} else if special != blockSize {
		return false, 0
	}
	lsn := uint64(le.Uint32(pg[0:]))<<32 | uint64(le.Uint32(pg[4:]))
	if lsn > checkpointLSN {
		return false, 0 // written after the last checkpoint: not a clean page
	}
	var frozen []int
	if kind == kindHeap {
		frozen = frozenXmins(pg, lower, upper)
	}
	if lsn <= stampLSN && len(frozen) == 0 {
		// Stamped already (a copy of a stamped page: a golden's slots):
		// nothing to change, so no checksum to verify or redo.
		return false, 0
	}
	sum := le.Uint16(pg[pdChecksum:])
	if sum != 0 && sum != pageChecksum(pg, blk) {
		return false, 0 // a checksum we cannot reproduce
	}
	if lsn > stampLSN {
		le.PutUint32(pg[0:], uint32(stampLSN>>32))
		le.PutUint32(pg[4:], uint32(stampLSN))
	}
	for _, off := range frozen {
		le.PutUint32(pg[off:], frozenXID)
	}
	if sum != 0 {
		le.PutUint16(pg[pdChecksum:], pageChecksum(pg, blk))
	}
	return true, len(frozen)
}

// frozenXmins lists the offsets of the frozen tuples on a heap page whose
// raw xmin is not FrozenTransactionId yet. It lists nothing unless every
// line pointer points inside the tuple area.
func frozenXmins(pg []byte, lower, upper int) []int {
	le := binary.NativeEndian
	var frozen []int
	for lp := pageHeaderSize; lp+4 <= lower; lp += 4 {
		v := le.Uint32(pg[lp:])
		off, flags, length := int(v&0x7FFF), (v>>15)&3, int(v>>17)
		if flags != lpNormal {
			continue
		}
		if off < upper || length < 23 || off+length > blockSize {
			return nil
		}
		if hoff := int(pg[off+22]); hoff < 24 || hoff%8 != 0 || hoff > length || le.Uint16(pg[off+18:])&0x07FF == 0 {
			return nil // not a heap tuple header: not a heap page
		}
		if le.Uint16(pg[off+20:])&xminFrozen == xminFrozen && le.Uint32(pg[off:]) != frozenXID {
			frozen = append(frozen, off)
		}
	}
	return frozen
}

// pageChecksum is PostgreSQL's data checksum of an 8 KiB page at block
// blk: 32 interleaved FNV-1a-style hashes over the page read as
// little-endian 32-bit words (pd_checksum as zero), two more rounds of
// zeros, folded by XOR, mixed with the block number, mapped to 1..65535.
func pageChecksum(pg []byte, blk uint32) uint16 {
	const nSums, fnvPrime = 32, 16777619
	sums := checksumBaseOffsets
	mix := func(j int, v uint32) {
		t := sums[j] ^ v
		sums[j] = t*fnvPrime ^ t>>17
	}
	le := binary.NativeEndian
	for i := 0; i < blockSize/(4*nSums); i++ {
		for j := 0; j < nSums; j++ {
			w := 4 * (i*nSums + j)
			v := le.Uint32(pg[w:])
			if w == pdChecksum-pdChecksum%4 { // the word holding pd_checksum (and pd_flags)
				v &^= 0xFFFF << (8 * (pdChecksum % 4))
			}
			mix(j, v)
		}
	}
	for r := 0; r < 2; r++ {
		for j := 0; j < nSums; j++ {
			mix(j, 0)
		}
	}
	var result uint32
	for _, s := range sums {
		result ^= s
	}
	result ^= blk
	return uint16(result%65535) + 1
}

// checksumBaseOffsets seed PostgreSQL's 32 checksum lanes.
var checksumBaseOffsets = [32]uint32{
	0x5B1F36E9, 0xB8525960, 0x02AB50AA, 0x1DE66D2A,
	0x79FF467A, 0x9BB9F8A3, 0x217E7CD2, 0x83E13D2C,
	0xF8D4474F, 0xE39EB970, 0x42C6AE16, 0x993216FA,
	0x7B093B5D, 0x98DAFF3C, 0xF718902A, 0x0B1C9CDB,
	0xE58F764B, 0x187636BC, 0x5D7B3BB1, 0xE73DE7DE,
	0x92BEC979, 0xCCA6C0B2, 0x304A0979, 0x85AA43D4,
	0x783125BB, 0x6CA8EAA2, 0xE407EAC6, 0x4B5CFC3E,
	0x9FBF8C76, 0x15CA20BE, 0xF2CA9FD3, 0x959BD756,
}

// classify reads block 0 of a relation's first segment: a page without
// special space is a table's (heap), a B-tree metapage a B-tree's; any
// other index type, a sequence or an unreadable file is skipped.
func classify(path string) relKind {
	f, err := os.Open(path)
	if err != nil {
		return kindSkip
	}
	defer f.Close()
	pg := make([]byte, blockSize)
	if _, err := io.ReadFull(f, pg); err != nil {
		return kindSkip
	}
	le := binary.NativeEndian
	upper, special := le.Uint16(pg[pdUpper:]), int(le.Uint16(pg[pdSpecial:]))
	switch {
	case upper == 0:
		return kindSkip
	case special == blockSize:
		return kindHeap
	case blockSize-special == 16 && le.Uint32(pg[pageHeaderSize:]) == btreeMagic:
		return kindBtree
	}
	return kindSkip
}

// markStamped marks the file at path stamped (engine.MarkStamped).
func markStamped(path string) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	defer f.Close()
	engine.MarkStamped(f)
}
