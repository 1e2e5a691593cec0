package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/golden"
)

const (
	spanSize = 1 << 20 // bytes handed from a layer's decoder to its writer at a time
	spansOut = 4       // spans in flight per layer
)

// extraction is what every layer of one pull writes into.
type extraction struct {
	dir  int // the data dir (see tree.go)
	want map[string]golden.File
	sums *fileSums
	wb   *writeback // nil: no early writeback
}

// entry is one tar entry being written: a whole file, or a part of one
// from off.
type entry struct {
	rel    string
	off, n int64
	size   int64     // the file's size in the manifest
	h      hash.Hash // nil for a part: verifyPulled reads parts back
	fd     *os.File  // the writer's
	done   int64     // the writer's
	zeros  int64     // the writer's: bytes in all-zero blocks (holes)
}

// holeSlack is how many more bytes of holes (zero blocks) than of data an
// entry may carry: a real file's free space is far less, and a file of
// nothing but holes would only cost time to read and hash.
const holeSlack = 1 << 30

// span is bytes of an entry, in order; buf nil ends the entry.
type span struct {
	e   *entry
	buf []byte
}

// extract writes the files of one layer's tar stream. The tar is read and
// decompressed in this goroutine while another hashes and writes what it
// read, so one big layer keeps both cores busy.
// in counts the layer's compressed bytes (nil: no inflation check).
func (x *extraction) extract(ctx context.Context, tr *tar.Reader, in *countReader, layer string) (err error) {
	w := &entryWriter{x: x, in: in, layer: layer, ch: make(chan span, spansOut), free: make(chan []byte, spansOut+1), done: make(chan struct{})}
	go w.run()
	defer func() {
		close(w.ch)
		<-w.done
		if werr := w.err; werr != nil && (err == nil || errors.Is(err, errWriterFailed)) {
			err = werr
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read layer: %w", err)
		}
		e, err := x.entry(hdr)
		if err != nil {
			return err
		}
		for read := int64(0); read < e.n; {
			if w.failed.Load() {
				return errWriterFailed
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			buf := w.buffer()
			m, err := io.ReadFull(tr, buf[:min(int64(len(buf)), e.n-read)])
			if err != nil {
				return fmt.Errorf("read layer: %w", err)
			}
			read += int64(m)
			w.ch <- span{e: e, buf: buf[:m]}
		}
		w.ch <- span{e: e}
	}
}

var errWriterFailed = errors.New("layer writer failed")

// entry checks a tar header against the golden's manifest and claims its
// range of the file.
func (x *extraction) entry(hdr *tar.Header) (*entry, error) {
	f, ok := x.want[hdr.Name]
	if !ok || hdr.Typeflag != tar.TypeReg {
		return nil, errs.Invalid("layer entry %q is not a regular file of the golden's manifest", hdr.Name)
	}
	var off int64
	if v, ok := hdr.PAXRecords[paxOffset]; ok {
		var err error
		if off, err = strconv.ParseInt(v, 10, 64); err != nil || off < 0 {
			return nil, errs.Invalid("layer entry %q has a bad offset %q", hdr.Name, v)
		}
	}
	if hdr.Size < 0 || off+hdr.Size > f.Size {
		return nil, errs.Invalid("layer entry %q (%d bytes at %d) is larger than the manifest's %d", hdr.Name, hdr.Size, off, f.Size)
	}
	if err := x.sums.claim(f.Path, off, hdr.Size); err != nil {
		return nil, err
	}
	e := &entry{rel: f.Path, off: off, n: hdr.Size, size: f.Size}
	// A whole file is hashed as it is written.
	if off == 0 && hdr.Size == f.Size {
		e.h = sha256.New()
	}
	return e, nil
}

// entryWriter hashes and writes the spans of one layer in its own
// goroutine. After a failure it drops what it is sent.
type entryWriter struct {
	x      *extraction
	ch     chan span
	free   chan []byte
	done   chan struct{}
	failed atomic.Bool
	err    error // read after done
	open   *entry
	in     *countReader // the layer's compressed bytes
	layer  string
	data   int64 // bytes outside zero blocks written from this layer
}

func (w *entryWriter) buffer() []byte {
	select {
	case b := <-w.free:
		return b[:cap(b)]
	default:
		return make([]byte, spanSize)
	}
}

func (w *entryWriter) run() {
	defer close(w.done)
	for p := range w.ch {
		if w.err == nil {
			if w.err = w.write(p); w.err != nil {
				w.failed.Store(true)
			}
		}
		if p.buf != nil {
			select {
			case w.free <- p.buf:
			default:
			}
		}
	}
	if w.open != nil && w.open.fd != nil {
		w.open.fd.Close()
	}
}

func (w *entryWriter) write(p span) error {
	e := p.e
	w.open = e
	if e.fd == nil {
		fd, err := openBeneath(w.x.dir, e.rel, unix.O_WRONLY|unix.O_CREAT, 0o600)
		if err != nil {
			return fmt.Errorf("write golden file: %w", err)
		}
		e.fd = os.NewFile(uintptr(fd), e.rel)
		// At its full size at once: zero blocks left unwritten are holes,
		// and the parts of a big file may arrive in any order.
		if err := e.fd.Truncate(e.size); err != nil {
			return fmt.Errorf("write %s: %w", e.rel, err)
		}
	}
	if p.buf == nil {
		w.open = nil
		if w.x.wb != nil {
			w.x.wb.finish(e.fd)
		}
		if err := e.fd.Close(); err != nil {
			return fmt.Errorf("write %s: %w", e.rel, err)
		}
		if e.h != nil {
			w.x.sums.set(e.rel, hex.EncodeToString(e.h.Sum(nil)))
		}
		return nil
	}
	if e.h != nil {
		e.h.Write(p.buf)
	}
	at := e.off + e.done
	e.done += int64(len(p.buf))
	zeros := zeroBytes(at, p.buf)
	e.zeros += zeros
	if err := w.inflated(int64(len(p.buf)) - zeros); err != nil {
		return err
	}
	if e.zeros > e.done-e.zeros+holeSlack {
		return errs.Invalid("layer entry %q carries holes (zero blocks) that exceed its data by more than %d MiB; refused", e.rel, holeSlack>>20)
	}
	if err := fsutil.WriteNonZero(e.fd, at, p.buf); err != nil {
		return fmt.Errorf("write %s (%d bytes at %d): %w", e.rel, len(p.buf), at, err)
	}
	if w.x.wb != nil {
		w.x.wb.wrote(e.fd, int64(len(p.buf)))
	}
	return nil
}

var zeroPage [4096]byte

// zeroBytes counts the bytes of p (at off in its file) in 4 KiB blocks
// that are all zero, which the write leaves as holes.
func zeroBytes(off int64, p []byte) int64 {
	var n int64
	for pos := 0; pos < len(p); {
		end := min(len(p), pos+4096-int((off+int64(pos))%4096))
		if bytes.Equal(p[pos:end], zeroPage[:end-pos]) {
			n += int64(end - pos)
		}
		pos = end
	}
	return n
}
