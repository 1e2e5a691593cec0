package mysql

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dbfork/dbfork/internal/engine"
)

// Page LSNs. InnoDB stamps every page it writes with the log sequence
// number of its last change (FIL_PAGE_LSN, its low half again in the page
// trailer, both under the page checksum). A build that loads one table
// differently moves the log position of every page written after it, so
// without more two goldens of recipes that differ in one seed table would
// share no table file, and every push would re-send them all (issue 15).
// After the seal's slow shutdown no page needs its LSN any more: nothing
// is left to recover or purge, the redo log holds nothing but its last
// checkpoint, and InnoDB only ever compares a page's LSN against log
// records newer than that checkpoint. So each page of a tablespace InnoDB
// wrote is stamped with one small fixed LSN, below any checkpoint, and
// its checksum recomputed; what the page holds is unchanged, and pages
// dbfork does not fully understand are left alone.

const (
	pageSize = 16384
	// stampLSN is what every stamped page claims as its last change: the
	// first LSN of a MariaDB 10.8+ log, far below any golden's checkpoint
	// (mariadb-install-db alone writes megabytes of log).
	stampLSN = 12288

	filPageLSN        = 16 // FIL_PAGE_LSN: 8 bytes
	filPageKeyVersion = 0  // full_crc32 (FIL_PAGE_FCRC32_KEY_VERSION): nonzero on an encrypted page
	pageTypeRtree     = 17854
	fspSpaceFlags     = 38 + 16
	// fcrc32Flags16K: the full_crc32 marker, 16 KiB pages, no page
	// compression — the format MariaDB 10.5+ creates by default.
	fcrc32Flags16K = 0x15
	// cryptDataOffset is where page 0 of a 16 KiB tablespace keeps its
	// encryption data, if it has any (after the extent descriptors).
	cryptDataOffset = 38 + 112 + 40*(pageSize/64)
)

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	cryptMagic = []byte("sCrypt")
)

// StampStats counts what stampPages did.
type StampStats struct {
	Files   int // tablespaces stamped
	Rows    int // of which tablespaces whose transaction ids were reset (pagetrx.go)
	Skipped int // tablespaces left alone (another format, encrypted)
	Pages   int // pages stamped
	Kept    int // pages left alone (unwritten, already stamped, checksum not understood)
}

// stampPages stamps the pages of every file-per-table tablespace (*.ibd)
// under dataDir, and resets the transaction ids of those layouts (by
// data-dir-relative path) describes. The server must be stopped (cleanly,
// slowly).
func stampPages(dataDir string, layouts map[string]rowLayout) (StampStats, error) {
	var st StampStats
	err := filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(d.Name(), ".ibd") {
			return nil
		}
		var lay *rowLayout
		if rel, err := filepath.Rel(dataDir, path); err == nil {
			if l, found := layouts[rel]; found {
				lay = &l
			}
		}
		if engine.StampedAlready(path) {
			return nil // not written since it was stamped (an intermediate golden's seed)
		}
		pages, kept, ok, err := stampTablespace(path, &lay)
		if err != nil {
			return fmt.Errorf("stamp page LSNs of %s: %w", path, err)
		}
		if !ok {
			st.Skipped++
			return nil
		}
		st.Files++
		if lay != nil {
			st.Rows++
		}
		st.Pages += pages
		st.Kept += kept
		return nil
	})
	return st, err
}

// stampTablespace stamps one .ibd file in place, 1 MiB at a time, writing
// back only the pages it changed; *lay (if not nil) lays out its rows,
// and is set to nil if page 0 shows another tablespace. ok is false when
// the tablespace is not one dbfork stamps (another checksum format, page
// size or compression, or encrypted).
func stampTablespace(path string, layp **rowLayout) (pages, kept int, ok bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return 0, 0, false, err
	}
	defer f.Close()
	first := make([]byte, pageSize)
	if _, err := f.ReadAt(first, 0); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, 0, false, nil // shorter than a page: not a tablespace we know
		}
		return 0, 0, false, err
	}
	if !stampable(first) {
		return 0, 0, false, nil
	}
	if *layp != nil && binary.BigEndian.Uint32(first[filPageSpaceID:]) != (*layp).space {
		*layp = nil // not the tablespace the server described
	}
	lay := *layp
	buf := make([]byte, 64*pageSize)
	for off := int64(0); ; off += int64(len(buf)) {
		n, rerr := f.ReadAt(buf, off)
		if rerr != nil && rerr != io.EOF {
			return pages, kept, true, rerr
		}
		n -= n % pageSize
		run := -1 // first page of the current run of changed pages
		for p := 0; p <= n/pageSize; p++ {
			changed := p < n/pageSize && stampPage(buf[p*pageSize:(p+1)*pageSize], lay)
			if changed {
				pages++
				if run < 0 {
					run = p
				}
				continue
			}
			if p < n/pageSize {
				kept++
			}
			if run >= 0 {
				if _, err := f.WriteAt(buf[run*pageSize:p*pageSize], off+int64(run*pageSize)); err != nil {
					return pages, kept, true, err
				}
				run = -1
			}
		}
		if rerr == io.EOF || n < len(buf) {
			break
		}
	}
	engine.MarkStamped(f)
	return pages, kept, true, f.Close()
}

// stampable says whether page 0 describes a tablespace whose pages
// stampPage understands: full_crc32, 16 KiB, no page compression, no
// encryption data.
func stampable(page0 []byte) bool {
	if binary.BigEndian.Uint32(page0[fspSpaceFlags:]) != fcrc32Flags16K {
		return false
	}
	if string(page0[cryptDataOffset:cryptDataOffset+len(cryptMagic)]) == string(cryptMagic) {
		return false
	}
	return validPage(page0)
}

// validPage checks a full_crc32 page: the trailer's copy of the LSN and
// the CRC-32C of everything before the checksum.
func validPage(pg []byte) bool {
	lsn := binary.BigEndian.Uint64(pg[filPageLSN:])
	if binary.BigEndian.Uint32(pg[pageSize-8:]) != uint32(lsn) {
		return false
	}
	return crc32.Checksum(pg[:pageSize-4], castagnoli) == binary.BigEndian.Uint32(pg[pageSize-4:])
}

// stampPage sets a written, unencrypted, valid full_crc32 page's LSN to
// stampLSN, resets its transaction ids if lay lays out its rows, and
// recomputes its checksum. It reports whether it changed the page; pages
// never written (LSN 0), encrypted, of an R-tree (spatial index: left to
// its own split bookkeeping) or failing their checksum are left as they
// are.
func stampPage(pg []byte, lay *rowLayout) bool {
	be := binary.BigEndian
	lsn := be.Uint64(pg[filPageLSN:])
	if lsn == 0 || be.Uint32(pg[filPageKeyVersion:]) != 0 || be.Uint16(pg[filPageType:]) == pageTypeRtree || !validPage(pg) {
		return false
	}
	changed := lay != nil && resetPageTrx(pg, *lay)
	if lsn > stampLSN {
		be.PutUint64(pg[filPageLSN:], stampLSN)
		be.PutUint32(pg[pageSize-8:], stampLSN)
		changed = true
	}
	if changed {
		be.PutUint32(pg[pageSize-4:], crc32.Checksum(pg[:pageSize-4], castagnoli))
	}
	return changed
}
