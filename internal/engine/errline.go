package engine

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
)

// errorLine finds, in a failing step's output, the line that says what
// went wrong: tools print warnings and hints after the error (Django's
// system checks, psql's HINT lines), so the tail alone often hid it. It
// keeps the first line that looks like an error and, for a Python
// traceback, the exception line that ends it.
type errorLine struct {
	mu      sync.Mutex
	partial []byte
	first   string
	inTrace bool
}

var errorLineRe = regexp.MustCompile(`(^|\s|:)(ERROR|FATAL|PANIC|Error|error|Exception)(:|\s|\]|$)|^panic: |^[A-Za-z_.]*(Error|Exception): |command not found|No such file or directory`)

func (e *errorLine) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	data := append(e.partial, p...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		e.line(string(data[:i]))
		data = data[i+1:]
	}
	if len(data) > 4096 {
		data = data[len(data)-4096:]
	}
	e.partial = append(e.partial[:0], data...)
	return len(p), nil
}

func (e *errorLine) line(l string) {
	l = strings.TrimRight(l, "\r")
	if e.first != "" {
		return
	}
	if strings.HasPrefix(l, "Traceback (most recent call last)") {
		e.inTrace = true
		return
	}
	if e.inTrace {
		if l == "" || l[0] == ' ' || l[0] == '\t' {
			return
		}
		e.first, e.inTrace = strings.TrimSpace(l), false
		return
	}
	if errorLineRe.MatchString(l) {
		e.first = strings.TrimSpace(l)
	}
}

// String is the error line found, or "" when none looked like one.
func (e *errorLine) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.first == "" && len(e.partial) > 0 {
		e.line(string(e.partial))
		e.partial = e.partial[:0]
	}
	if len(e.first) > 300 {
		return e.first[:300] + "…"
	}
	return e.first
}
