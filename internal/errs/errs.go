// Package errs holds the few error kinds dbfork distinguishes and the one
// place that maps them to process exit codes (and, later, HTTP statuses).
package errs

import (
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
)

// kindError attaches a kind to a message without putting the kind's own
// text in the message: users see "recipe: unknown key x", not
// "invalid input: recipe: unknown key x".
type kindError struct {
	kind error
	msg  string
	err  error
}

func (e *kindError) Error() string {
	if e.err != nil && e.msg == "" {
		return e.err.Error()
	}
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

func (e *kindError) Is(target error) bool { return target == e.kind }
func (e *kindError) Unwrap() error        { return e.err }

// Invalid reports bad input from the user (recipe, flags, arguments).
func Invalid(format string, a ...any) error {
	return &kindError{kind: ErrInvalid, msg: fmt.Sprintf(format, a...)}
}

// NotFound reports a missing golden, instance or file.
func NotFound(format string, a ...any) error {
	return &kindError{kind: ErrNotFound, msg: fmt.Sprintf(format, a...)}
}

// Unsupported reports something this machine or filesystem cannot do.
func Unsupported(format string, a ...any) error {
	return &kindError{kind: ErrUnsupported, msg: fmt.Sprintf(format, a...)}
}

// MissingTool reports a binary that could not be found.
func MissingTool(format string, a ...any) error {
	return &kindError{kind: ErrMissingTool, msg: fmt.Sprintf(format, a...)}
}

// Conflict reports a resource held by someone else.
func Conflict(format string, a ...any) error {
	return &kindError{kind: ErrConflict, msg: fmt.Sprintf(format, a...)}
}

// Busy reports a resource that did not become free in time (a pool whose
// instances are all leased); trying again later may succeed.
func Busy(format string, a ...any) error {
	return &kindError{kind: ErrBusy, msg: fmt.Sprintf(format, a...)}
}

// Exit codes, stable so scripts can branch on them.
const (
	ExitFailure     = 1
	ExitInvalid     = 2
	ExitNotFound    = 3
	ExitUnsupported = 4
	ExitConflict    = 5
	ExitBusy        = 6
)

// ExitCode maps an error to the process exit status.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrInvalid):
		return ExitInvalid
	case errors.Is(err, ErrNotFound):
		return ExitNotFound
	case errors.Is(err, ErrUnsupported), errors.Is(err, ErrMissingTool):
		return ExitUnsupported
	case errors.Is(err, ErrConflict):
		return ExitConflict
	case errors.Is(err, ErrBusy):
		return ExitBusy
	}
	return ExitFailure
}

// kinds names each kind on the wire (API error bodies) with its HTTP
// status. This table and ExitCode are the only places kinds become
// numbers.
var kinds = []struct {
	kind   error
	name   string
	status int
}{
	{ErrInvalid, "invalid", 400},
	{ErrNotFound, "not_found", 404},
	{ErrConflict, "conflict", 409},
	{ErrUnsupported, "unsupported", 501},
	{ErrMissingTool, "missing_tool", 501},
	{ErrBusy, "busy", 503},
}

// HTTP maps an error to the API's status code and kind name: 400 bad
// request, 404 unknown golden/lease, 409 held by someone else, 501 not
// possible on this machine, 503 no instance free in time, 500 the rest.
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
			return &kindError{kind: k.kind, msg: msg}
		}
	}
	return errors.New(msg)
}
