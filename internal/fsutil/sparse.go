package fsutil

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// PunchZeros deallocates every aligned block of path that holds only
// zeros (FALLOC_FL_PUNCH_HOLE, size kept). What the file reads back is
// unchanged, so checksums are too; it just stops owning disk for those
// blocks, and reflink clones, OverlayFS copy-ups and sparse-aware copies
// of it stop paying for them. It returns the bytes it freed.
func PunchZeros(path string, block int) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, block)
	zero := make([]byte, block)
	var off, start, freed int64 = 0, -1, 0
	punch := func(end int64) error {
		if start < 0 || end <= start {
			return nil
		}
		if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, start, end-start); err != nil {
			return fmt.Errorf("punch holes in %s: %w", path, err)
		}
		freed += end - start
		start = -1
		return nil
	}
	for {
		n, err := io.ReadFull(f, buf)
		if n == block && bytes.Equal(buf, zero) {
			if start < 0 {
				start = off
			}
		} else if perr := punch(off); perr != nil {
			return freed, perr
		}
		off += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return freed, err
		}
	}
	if err := punch(off); err != nil {
		return freed, err
	}
	return freed, f.Sync()
}

// WriteSparse copies n bytes of r into f from offset off, leaving holes
// where whole 4 KiB blocks (aligned in the file) are zero, and extends f
// to off+n. The range is punched first, so whatever f held there reads
// back as what r gave; where the filesystem cannot punch, every block is
// written.
func WriteSparse(f *os.File, off int64, r io.Reader, n int64) (int64, error) {
	const block = 4096
	skipZeros := n == 0 || unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n) == nil
	buf := make([]byte, 256<<10)
	var done int64
	for done < n {
		want := min(int64(len(buf)), n-done)
		m, err := io.ReadFull(r, buf[:want])
		var werr error
		if skipZeros {
			werr = writeNonZero(f, off+done, buf[:m], block)
		} else {
			_, werr = f.WriteAt(buf[:m], off+done)
		}
		if werr != nil {
			return done, werr
		}
		done += int64(m)
		if err != nil {
			return done, err
		}
	}
	fi, err := f.Stat()
	if err != nil {
		return done, err
	}
	if fi.Size() < off+n {
		return done, f.Truncate(off + n)
	}
	return done, nil
}

// WriteNonZero writes p at off in f, skipping the 4 KiB blocks (aligned
// in the file) that are all zero, so they stay holes in a fresh or punched
// range. Runs of non-zero blocks go out in one write each.
func WriteNonZero(f *os.File, off int64, p []byte) error {
	return writeNonZero(f, off, p, 4096)
}

var zeroBlock [64 << 10]byte

func writeNonZero(f *os.File, off int64, p []byte, block int64) error {
	run := -1 // start in p of the pending run of non-zero blocks
	var pos int64
	flush := func(end int64) error {
		if run < 0 {
			return nil
		}
		_, err := f.WriteAt(p[run:end], off+int64(run))
		run = -1
		return err
	}
	for pos < int64(len(p)) {
		end := pos + block - (off+pos)%block // up to the next block boundary
		if end > int64(len(p)) {
			end = int64(len(p))
		}
		if allZero(p[pos:end]) {
			if err := flush(pos); err != nil {
				return err
			}
		} else if run < 0 {
			run = int(pos)
		}
		pos = end
	}
	return flush(pos)
}

func allZero(p []byte) bool {
	for len(p) > 0 {
		n := min(len(p), len(zeroBlock))
		if !bytes.Equal(p[:n], zeroBlock[:n]) {
			return false
		}
		p = p[n:]
	}
	return true
}
