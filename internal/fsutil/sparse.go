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
// to off+n. f must not hold data in that range yet (a new file): the
// holes read back as the zeros that were skipped.
func WriteSparse(f *os.File, off int64, r io.Reader, n int64) (int64, error) {
	const block = 4096
	buf := make([]byte, 256<<10)
	var done int64
	for done < n {
		want := min(int64(len(buf)), n-done)
		m, err := io.ReadFull(r, buf[:want])
		if err := writeNonZero(f, off+done, buf[:m], block); err != nil {
			return done, err
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

// writeNonZero writes p at off, skipping the blocks that are all zero.
func writeNonZero(f *os.File, off int64, p []byte, block int64) error {
	for len(p) > 0 {
		end := block - off%block // up to the next block boundary
		if end > int64(len(p)) {
			end = int64(len(p))
		}
		chunk := p[:end]
		if !allZero(chunk) {
			if _, err := f.WriteAt(chunk, off); err != nil {
				return err
			}
		}
		off += end
		p = p[end:]
	}
	return nil
}

func allZero(p []byte) bool {
	for len(p) >= 8 {
		if p[0]|p[1]|p[2]|p[3]|p[4]|p[5]|p[6]|p[7] != 0 {
			return false
		}
		p = p[8:]
	}
	for _, b := range p {
		if b != 0 {
			return false
		}
	}
	return true
}
