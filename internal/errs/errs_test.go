package errs_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/dbfork/dbfork/internal/errs"
)

// A kind keeps the cause given with %w: errors.Is/As see through it, and
// the message is the formatted text alone (no kind prefix).
func TestKindsKeepCauses(t *testing.T) {
	cause := &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}
	err := errs.NotFound("recipe %s: %w", "/x", cause)
	if !errors.Is(err, errs.ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("kind or cause lost: %v", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != "/x" {
		t.Fatalf("errors.As through the kind: %v", pe)
	}
	if got := err.Error(); got != "recipe /x: open /x: file does not exist" {
		t.Errorf("message %q", got)
	}
	wrapped := fmt.Errorf("build: %w", errs.Invalid("bad %q", "y"))
	if !errors.Is(wrapped, errs.ErrInvalid) || errors.Is(wrapped, errs.ErrNotFound) || errs.ExitCode(wrapped) != errs.ExitInvalid {
		t.Errorf("wrapped kind: %v exit %d", wrapped, errs.ExitCode(wrapped))
	}
}

// One table maps kinds and context errors to statuses and exit codes.
func TestOneTable(t *testing.T) {
	cases := []struct {
		err    error
		status int
		kind   string
		exit   int
	}{
		{errs.Invalid("x"), 400, "invalid", errs.ExitInvalid},
		{errs.NotFound("x"), 404, "not_found", errs.ExitNotFound},
		{errs.Conflict("x"), 409, "conflict", errs.ExitConflict},
		{errs.Unsupported("x"), 501, "unsupported", errs.ExitUnsupported},
		{errs.MissingTool("x"), 501, "missing_tool", errs.ExitUnsupported},
		{errs.Busy("x"), 503, "busy", errs.ExitBusy},
		{fmt.Errorf("wait: %w", context.Canceled), 503, "busy", errs.ExitInterrupted},
		{context.DeadlineExceeded, 503, "busy", errs.ExitFailure},
		{errs.Invalid("bad wait: %w", context.DeadlineExceeded), 400, "invalid", errs.ExitInvalid},
		{errors.New("boom"), 500, "internal", errs.ExitFailure},
	}
	for _, c := range cases {
		status, kind := errs.HTTP(c.err)
		if status != c.status || kind != c.kind || errs.ExitCode(c.err) != c.exit {
			t.Errorf("%v: %d %s exit %d, want %d %s exit %d", c.err, status, kind, errs.ExitCode(c.err), c.status, c.kind, c.exit)
		}
		if c.kind != "internal" {
			back := errs.FromWire(kind, c.err.Error())
			if s, k := errs.HTTP(back); s != c.status || k != c.kind || back.Error() != c.err.Error() {
				t.Errorf("%v back from the wire: %d %s %q", c.err, s, k, back)
			}
		}
	}
	if errs.ExitCode(nil) != 0 {
		t.Error("nil is not exit 0")
	}
}
