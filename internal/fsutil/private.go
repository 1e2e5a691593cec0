package fsutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FIEMAP (linux/fiemap.h): the extent map of a file, with a flag on
// extents shared with other files (reflinks, snapshots).
const (
	fsIocFiemap      = 0xC020660B
	fiemapFlagSync   = 0x1
	fiemapExtentLast = 0x1
	fiemapExtentShrd = 0x2000
	fiemapBatch      = 128
)

type fiemapHdr struct {
	Start, Length                uint64
	Flags, Mapped, Count, Unused uint32
}

type fiemapExtent struct {
	Logical, Physical, Length uint64
	_                         [2]uint64
	Flags                     uint32
	_                         [3]uint32
}

// PrivateBytes is the disk space the files below dir hold for themselves:
// allocated bytes in extents not shared with any other file. For a
// reflink or snapshot clone it is what the clone has written; for a plain
// copy, everything. Where FIEMAP does not work, allocated blocks count.
func PrivateBytes(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		n, err := filePrivate(p)
		if err != nil {
			return nil // a file that vanished while walking (a server's temp file)
		}
		total += n
		return nil
	})
	return total, err
}

func filePrivate(p string) (int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	allocated := st.Blocks * 512
	buf := make([]byte, int(unsafe.Sizeof(fiemapHdr{}))+fiemapBatch*int(unsafe.Sizeof(fiemapExtent{})))
	hdr := (*fiemapHdr)(unsafe.Pointer(&buf[0]))
	exts := unsafe.Slice((*fiemapExtent)(unsafe.Pointer(&buf[unsafe.Sizeof(fiemapHdr{})])), fiemapBatch)
	var private int64
	start := uint64(0)
	for {
		*hdr = fiemapHdr{Start: start, Length: ^uint64(0), Flags: fiemapFlagSync, Count: fiemapBatch}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
			return allocated, nil
		}
		if hdr.Mapped == 0 {
			return private, nil
		}
		for _, x := range exts[:hdr.Mapped] {
			if x.Flags&fiemapExtentShrd == 0 {
				private += int64(x.Length)
			}
			start = x.Logical + x.Length
			if x.Flags&fiemapExtentLast != 0 {
				return private, nil
			}
		}
	}
}

// DistinctBytes is the disk space the regular files below dir take
// together, blocks two of them share counted once (a golden whose slots
// share their database's blocks: about one database, not 1+N). An
// extent is known by its physical start and length; where FIEMAP does
// not work, a file's allocated blocks count whole.
func DistinctBytes(dir string) (int64, error) {
	type ext struct{ physical, length uint64 }
	seen := map[ext]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
			return err
		}
		exts, ok := extentsOf(f, uint64(st.Size))
		if !ok {
			total += st.Blocks * 512
			return nil
		}
		for _, e := range exts {
			k := ext{e.physical, e.length}
			if !seen[k] {
				seen[k] = true
				total += int64(e.length)
			}
		}
		return nil
	})
	return total, err
}
