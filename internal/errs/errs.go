// Package errs holds the few error kinds dbfork distinguishes and the one
// table that maps them to process exit codes and HTTP statuses.
package errs

import (
	"context"
	"errors"
	"fmt"
)

// Kinds. Wrap them with %w; callers test with errors.Is.
var (
	ErrInvalid     = errors.New("invalid input")
	ErrNotFound    = errors.New("not found")
	ErrUnsupported = errors.New("unsupported")
	ErrConflict    = errors.New("conflict")
	ErrMissingTool = errors.New("missing tool")
	ErrBusy        = errors.New("busy")
	ErrForbidden   = errors.New("forbidden")
)

// kindError attaches a kind to a message without putting the kind's own
// text in the message: users see "recipe: unknown key x", not
// "invalid input: recipe: unknown key x". The message comes from
// fmt.Errorf, so causes given with %w stay reachable through
// errors.Is/As.
type kindError struct {
	kind error
	err  error // the formatted message, wrapping any %w causes
}

func (e *kindError) Error() string        { return e.err.Error() }
func (e *kindError) Is(target error) bool { return target == e.kind }
func (e *kindError) Unwrap() error        { return e.err }

func newKind(kind error, format string, a []any) error {
	return &kindError{kind: kind, err: fmt.Errorf(format, a...)}
}

// Invalid reports bad input from the user (recipe, flags, arguments).
func Invalid(format string, a ...any) error { return newKind(ErrInvalid, format, a) }

// NotFound reports a missing golden, instance or file.
func NotFound(format string, a ...any) error { return newKind(ErrNotFound, format, a) }

// Unsupported reports something this machine or filesystem cannot do.
func Unsupported(format string, a ...any) error { return newKind(ErrUnsupported, format, a) }

// MissingTool reports a binary that could not be found.
func MissingTool(format string, a ...any) error { return newKind(ErrMissingTool, format, a) }

// Conflict reports a resource held by someone else.
func Conflict(format string, a ...any) error { return newKind(ErrConflict, format, a) }

// Busy reports a resource that did not become free in time (a pool whose
// instances are all leased); trying again later may succeed.
func Busy(format string, a ...any) error { return newKind(ErrBusy, format, a) }

// Forbidden reports a caller this process does not serve (a root
// daemon's peer of another uid, without `serve --allow-users`).
func Forbidden(format string, a ...any) error { return newKind(ErrForbidden, format, a) }

// Exit codes, stable so scripts can branch on them.
const (
	ExitFailure     = 1
	ExitInvalid     = 2
	ExitNotFound    = 3
	ExitUnsupported = 4
	ExitConflict    = 5
	ExitBusy        = 6
	ExitForbidden   = 7
	ExitInterrupted = 130 // like a shell after SIGINT
)

// kinds is the one table where errors become numbers: each kind's name on
// the wire (API error bodies), its HTTP status and its exit code. The
// first row an error matches wins; context errors come last, so a kind
// that wraps one keeps its own row. A call whose context ended answers
// 503 (the caller left, or waited too long: trying again may work).
var kinds = []struct {
	kind   error
	name   string
	status int
	exit   int
}{
	{ErrInvalid, "invalid", 400, ExitInvalid},
	{ErrNotFound, "not_found", 404, ExitNotFound},
	{ErrConflict, "conflict", 409, ExitConflict},
	{ErrUnsupported, "unsupported", 501, ExitUnsupported},
	{ErrMissingTool, "missing_tool", 501, ExitUnsupported},
	{ErrBusy, "busy", 503, ExitBusy},
	{ErrForbidden, "forbidden", 403, ExitForbidden},
	{context.Canceled, "busy", 503, ExitInterrupted},
	{context.DeadlineExceeded, "busy", 503, ExitFailure},
}

// ExitCode maps an error to the process exit status.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	for _, k := range kinds {
		if errors.Is(err, k.kind) {
			return k.exit
		}
	}
	return ExitFailure
}

// HTTP maps an error to the API's status code and kind name: 400 bad
// request, 404 unknown golden/lease, 409 held by someone else, 501 not
// possible on this machine, 503 no instance free in time (or the call's
// context ended), 500 the rest.
func HTTP(err error) (status int, kind string) {
	for _, k := range kinds {
		if errors.Is(err, k.kind) {
			return k.status, k.name
		}
	}
	return 500, "internal"
}

// FromWire rebuilds an error of the named kind from an API error body, so
// a client exits with the same code as if it had done the work itself.
func FromWire(kind, msg string) error {
	for _, k := range kinds {
		if k.name == kind {
			return &kindError{kind: k.kind, err: errors.New(msg)}
		}
	}
	return errors.New(msg)
}
