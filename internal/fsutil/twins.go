package fsutil

import (
	"bytes"
	"context"
	"errors"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Extent flags that make an extent's physical address say nothing about
// its bytes: not yet allocated, not on disk as it reads, or inline.
const (
	fiemapExtentUnknown    = 0x2
	fiemapExtentDelalloc   = 0x4
	fiemapExtentEncoded    = 0x8
	fiemapExtentEncrypted  = 0x80
	fiemapExtentNotAligned = 0x100
	fiemapExtentInline     = 0x200
	fiemapExtentTail       = 0x400
	fiemapExtentUnwritten  = 0x800
	opaqueExtent           = fiemapExtentUnknown | fiemapExtentDelalloc | fiemapExtentEncoded | fiemapExtentEncrypted |
		fiemapExtentNotAligned | fiemapExtentInline | fiemapExtentTail | fiemapExtentUnwritten
)

// extent is where a range of a file lives on its device.
type extent struct{ logical, physical, length uint64 }

// extentsOf is the extent map of f's first size bytes (synced first),
// adjacent extents merged, or ok false where FIEMAP does not work or an
// extent's address does not pin its bytes. Extents past the end of the
// file (XFS preallocates there while a file grows) are not its content.
func extentsOf(f *os.File, size uint64) (out []extent, ok bool) {
	buf := make([]byte, int(unsafe.Sizeof(fiemapHdr{}))+fiemapBatch*int(unsafe.Sizeof(fiemapExtent{})))
	hdr := (*fiemapHdr)(unsafe.Pointer(&buf[0]))
	exts := unsafe.Slice((*fiemapExtent)(unsafe.Pointer(&buf[unsafe.Sizeof(fiemapHdr{})])), fiemapBatch)
	start := uint64(0)
	for start < size {
		*hdr = fiemapHdr{Start: start, Length: size - start, Flags: fiemapFlagSync, Count: fiemapBatch}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
			return nil, false
		}
		if hdr.Mapped == 0 {
			return out, true
		}
		for _, x := range exts[:hdr.Mapped] {
			if x.Logical >= size {
				return out, true
			}
			if x.Flags&opaqueExtent != 0 {
				return nil, false
			}
			e := extent{x.Logical, x.Physical, min(x.Length, size-x.Logical)}
			if n := len(out); n > 0 && out[n-1].logical+out[n-1].length == e.logical && out[n-1].physical+out[n-1].length == e.physical {
				out[n-1].length += e.length
			} else {
				out = append(out, e)
			}
			start = x.Logical + x.Length
			if x.Flags&fiemapExtentLast != 0 {
				return out, true
			}
		}
	}
	return out, true
}

// SameBlocks reports whether a and b are files of the same size on the
// same filesystem whose every byte lives in the same blocks (clones of
// one another, or deduplicated): then they read the same, which this
// proves without reading either. Any doubt (no FIEMAP, an extent whose
// address does not pin its bytes, a hole in one only) is false.
func SameBlocks(a, b *os.File) bool {
	var sa, sb syscall.Stat_t
	if syscall.Fstat(int(a.Fd()), &sa) != nil || syscall.Fstat(int(b.Fd()), &sb) != nil ||
		sa.Dev != sb.Dev || sa.Size != sb.Size || sa.Mode&syscall.S_IFMT != syscall.S_IFREG || sb.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return false
	}
	ea, ok := extentsOf(a, uint64(sa.Size))
	if !ok {
		return false
	}
	eb, ok := extentsOf(b, uint64(sb.Size))
	if !ok || len(ea) != len(eb) {
		return false
	}
	for i := range ea {
		if ea[i] != eb[i] {
			return false
		}
	}
	return true
}

// SameBlocksPath is SameBlocks by path (links not followed).
func SameBlocksPath(a, b string) bool {
	fa, err := os.OpenFile(a, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer fa.Close()
	fb, err := os.OpenFile(b, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer fb.Close()
	return SameBlocks(fa, fb)
}

// compareChunk is how much CloneIfEqual reads of each file at a time.
const compareChunk = 4 << 20

// ErrDiffer says CloneIfEqual found the two files' bytes differ.
var ErrDiffer = errors.New("contents differ")

// CloneIfEqual makes dst a clone of src (FICLONE: dst's blocks become
// src's) when their bytes are equal, which it checks by reading both in
// large sequential reads first; it returns ErrDiffer when they differ
// (dst untouched) and the ioctl's error where the filesystem cannot
// clone. Only for files nobody else writes meanwhile (a stopped build's
// data dir): the check and the clone are two steps. The kernel's own
// checked sharing (FIDEDUPERANGE) reads a page at a time without
// readahead: 29 slot copies of a 1 GB database took minutes.
func CloneIfEqual(ctx context.Context, src, dst *os.File) error {
	var st, dt syscall.Stat_t
	if err := syscall.Fstat(int(src.Fd()), &st); err != nil {
		return err
	}
	if err := syscall.Fstat(int(dst.Fd()), &dt); err != nil {
		return err
	}
	if st.Size != dt.Size {
		return ErrDiffer
	}
	a, b := make([]byte, compareChunk), make([]byte, compareChunk)
	for off := int64(0); off < st.Size; off += compareChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int(min(st.Size-off, compareChunk))
		if _, err := src.ReadAt(a[:n], off); err != nil {
			return err
		}
		if _, err := dst.ReadAt(b[:n], off); err != nil {
			return err
		}
		if !bytes.Equal(a[:n], b[:n]) {
			return ErrDiffer
		}
	}
	return unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
}
