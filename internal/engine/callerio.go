package engine

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// OpenInput opens a recipe input or a recipe for reading, refusing what
// is not a regular file: a FIFO or a device named (or swapped in) as an
// input would otherwise hang or feed a build forever. O_NONBLOCK keeps
// the open itself from waiting for a FIFO's writer.
func OpenInput(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (%s): name a file", path, kindOf(fi.Mode()))
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a plain file"
}
