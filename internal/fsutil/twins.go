package fsutil

import (
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

// dedupeChunk is how much one FIDEDUPERANGE call asks for (btrfs does
// at most 16 MiB a call).
const dedupeChunk = 16 << 20

// ErrDiffer says Dedupe found the two files' bytes differ.
var ErrDiffer = errors.New("contents differ")

// Dedupe makes dst share src's blocks where their bytes are the same:
// the kernel compares each range and shares it only if equal
// (FIDEDUPERANGE), so dst reads the same before and after. It returns
// ErrDiffer at the first range that differs (the ranges before stay
// shared), and the ioctl's error where the filesystem cannot. It stops
// between calls when ctx ends.
func Dedupe(ctx context.Context, src, dst *os.File) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(src.Fd()), &st); err != nil {
		return err
	}
	var dt syscall.Stat_t
	if err := syscall.Fstat(int(dst.Fd()), &dt); err != nil {
		return err
	}
	if st.Size != dt.Size {
		return ErrDiffer
	}
	for off := uint64(0); off < uint64(st.Size); {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(uint64(st.Size)-off, dedupeChunk)
		// The kernel's compare reads a page at a time, without
		// readahead: ask for this range and the next in large reads
		// first (a cold 1 GiB copy otherwise took minutes).
		for _, f := range []*os.File{src, dst} {
			_ = unix.Fadvise(int(f.Fd()), int64(off), int64(2*dedupeChunk), unix.FADV_WILLNEED)
		}
		r := unix.FileDedupeRange{Src_offset: off, Src_length: n,
			Info: []unix.FileDedupeRangeInfo{{Dest_fd: int64(dst.Fd()), Dest_offset: off}}}
		if err := unix.IoctlFileDedupeRange(int(src.Fd()), &r); err != nil {
			return err
		}
		switch {
		case r.Info[0].Status == unix.FILE_DEDUPE_RANGE_DIFFERS:
			return ErrDiffer
		case r.Info[0].Status < 0:
			return syscall.Errno(-r.Info[0].Status)
		case r.Info[0].Bytes_deduped == 0:
			return ErrDiffer // nothing done: do not loop
		}
		off += r.Info[0].Bytes_deduped
	}
	return nil
}
