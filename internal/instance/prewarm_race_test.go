package instance_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/testenv"
)

// Issue 29 (the lows): prewarm runs as root over a clone the server user
// can change while it walks. A subdir swapped for a symlink to a dir
// outside, back and forth, must never make prewarm open anything there:
// inotify reports every open of that dir or a file in it, whoever makes it.
func TestPrewarmRacingSymlinkSwaps(t *testing.T) {
	testenv.RequireRoot(t)
	root := testenv.Dir(t)
	_, _, _, in := overlayInstance(t, root)
	sub := filepath.Join(in.State.DataDir, "racing", "sub")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{sub, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := 0; f < 20; f++ {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprint(f)), []byte("keep me"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ino, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ino)
	if _, err := unix.InotifyAddWatch(ino, outside, unix.IN_OPEN|unix.IN_ACCESS|unix.IN_MODIFY); err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.Rename(sub, sub+"x")
			_ = os.Symlink(outside, sub)
			_ = os.Remove(sub)
			_ = os.Rename(sub+"x", sub)
		}
	}()
	hot := []string{"racing/sub/0", "racing/sub/1"}
	for i := 0; i < 40; i++ {
		if _, err := instance.Prewarm(context.Background(), in.State, hot, nil); err != nil {
			close(stop)
			<-done
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
	buf := make([]byte, 64<<10)
	n, err := unix.Read(ino, buf)
	if n > 0 {
		var seen []string
		for off := 0; off+unix.SizeofInotifyEvent <= n && len(seen) < 10; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)])
			seen = append(seen, fmt.Sprintf("%#x %q", ev.Mask, trimNUL(name)))
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
		t.Fatalf("prewarm touched the dir outside the clone through a swapped subdir: %v", seen)
	}
	if err != unix.EAGAIN {
		t.Fatalf("reading inotify events: %v", err)
	}
}

func trimNUL(s string) string {
	for len(s) > 0 && s[len(s)-1] == 0 {
		s = s[:len(s)-1]
	}
	return s
}
