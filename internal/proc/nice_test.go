package proc

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestNicedOnlyItsThread: fn runs at the nice value asked for, and the
// caller's thread keeps its own.
func TestNicedOnlyItsThread(t *testing.T) {
	// getpriority returns 20 - nice (the raw syscall's convention).
	before, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	if err != nil {
		t.Fatal(err)
	}
	var inside int
	if err := Niced(Background, func() error {
		p, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
		inside = 20 - p
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if inside != Background {
		t.Fatalf("nice inside fn = %d, want %d", inside, Background)
	}
	after, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	if err != nil || after != before {
		t.Fatalf("caller's priority %d -> %d (%v)", before, after, err)
	}
}
