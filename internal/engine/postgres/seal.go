package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/engine"
)

// Seal trims a cleanly shut down golden's WAL to what a server starting
// on it reads: the segment holding the shutdown checkpoint, of which only
// its first page (the long header every read of the segment validates)
// and the checkpoint's page and the next are kept; the rest becomes holes.
// Older and recycled segments go. After a clean shutdown every change is
// in the data files, so no clone needs the WAL before the checkpoint; what
// a build left there (timing-dependent records, recycled segments full of
// old WAL) made every rebuild differ by up to max_wal_size (OCI pushes
// re-sent it) and cost OverlayFS clones a 16 MiB copy-up when a recycled
// segment was renamed. Anything unexpected leaves the WAL as it is.
// Before that, the relation files' pages are stamped (stamp.go).
func (p *Postgres) Seal(ctx context.Context, spec engine.StartSpec) error {
	ck, err := readCheckpoint(filepath.Join(spec.DataDir, "global", "pg_control"))
	if err != nil || !ck.ok {
		return err
	}
	if _, err := stampRelations(spec.DataDir, ck.lsn); err != nil {
		return fmt.Errorf("seal golden: %w", err)
	}
	if slots, _ := os.ReadDir(filepath.Join(spec.DataDir, "pg_replslot")); len(slots) > 0 {
		return nil // a slot's restart point may be in WAL the seal would drop
	}
	wal := filepath.Join(spec.DataDir, "pg_wal")
	entries, err := os.ReadDir(wal)
	if err != nil {
		return fmt.Errorf("seal golden: %w", err)
	}
	var keep string
	var pageSize, segSize int64
	for _, e := range entries {
		if !segmentName.MatchString(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		ps, ss, err := segmentHeader(filepath.Join(wal, e.Name()))
		if err != nil || ps == 0 || ss == 0 || ss&(ss-1) != 0 {
			continue
		}
		if e.Name() == segmentFor(ck.tli, ck.lsn, ss) {
			keep, pageSize, segSize = e.Name(), ps, ss
		}
	}
	page := int64(ck.lsn%uint64(segSize)) / pageSize * pageSize
	if keep == "" || page+2*pageSize > segSize {
		// No segment we understand holds the checkpoint, or its record
		// may run on into the next segment: leave the WAL as it is.
		return nil
	}
	for _, e := range entries {
		if segmentName.MatchString(e.Name()) && e.Name() != keep && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(wal, e.Name())); err != nil {
				return fmt.Errorf("seal golden: %w", err)
			}
		}
	}
	status, _ := os.ReadDir(filepath.Join(wal, "archive_status"))
	for _, e := range status {
		_ = os.Remove(filepath.Join(wal, "archive_status", e.Name()))
	}
	return zeroRanges(filepath.Join(wal, keep), [][2]int64{{pageSize, page}, {page + 2*pageSize, segSize}})
}

var segmentName = regexp.MustCompile(`^[0-9A-F]{24}$`)

type checkpoint struct {
	lsn uint64
	tli uint32
	ok  bool // a shutdown checkpoint of a layout this code knows
}

// readCheckpoint reads the latest checkpoint's location and timeline from
// pg_control (PostgreSQL 11 and later: pg_control_version >= 1100; the
// checkpoint LSN at offset 32, the copy of its record from 40: redo LSN,
// then the timeline). A shutdown checkpoint's redo is itself.
func readCheckpoint(path string) (checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return checkpoint{}, fmt.Errorf("seal golden: %w", err)
	}
	defer f.Close()
	var b [52]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return checkpoint{}, fmt.Errorf("seal golden: read pg_control: %w", err)
	}
	le := binary.NativeEndian
	version, state := le.Uint32(b[8:12]), le.Uint32(b[16:20])
	ck := checkpoint{lsn: le.Uint64(b[32:40]), tli: le.Uint32(b[48:52])}
	redo := le.Uint64(b[40:48])
	ck.ok = version >= 1100 && state == dbShutdowned && redo == ck.lsn && ck.tli > 0
	return ck, nil
}

// segmentHeader reads a WAL segment's long page header: its page size and
// segment size.
func segmentHeader(path string) (pageSize, segSize int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var b [40]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return 0, 0, err
	}
	return int64(binary.NativeEndian.Uint32(b[36:40])), int64(binary.NativeEndian.Uint32(b[32:36])), nil
}

// segmentFor names the WAL segment holding lsn on timeline tli.
func segmentFor(tli uint32, lsn uint64, segSize int64) string {
	segNo := lsn / uint64(segSize)
	perID := uint64(0x100000000) / uint64(segSize)
	return fmt.Sprintf("%08X%08X%08X", tli, segNo/perID, segNo%perID)
}

// zeroRanges turns each [from, to) of path into a hole (zeros written
// where the filesystem cannot punch).
func zeroRanges(path string, ranges [][2]int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("seal golden: %w", err)
	}
	defer f.Close()
	for _, r := range ranges {
		if r[1] <= r[0] {
			continue
		}
		err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, r[0], r[1]-r[0])
		if err != nil {
			if _, err := f.WriteAt(make([]byte, r[1]-r[0]), r[0]); err != nil {
				return fmt.Errorf("seal golden: zero %s: %w", path, err)
			}
		}
	}
	return f.Sync()
}
