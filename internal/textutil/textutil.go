// Package textutil holds the small string helpers more than one layer
// needs (the engines and the store both quote tools' output in errors).
// It imports nothing of dbfork.
package textutil

import "strings"

// OneLine folds a tool's output into one line for an error message: its
// lines joined with sep, every run of blanks one space, and when max > 0
// cut to max bytes ending in "...".
func OneLine(s, sep string, max int) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", sep)
	s = strings.Join(strings.Fields(s), " ")
	if max > 0 && len(s) > max {
		s = s[:max-3] + "..."
	}
	return s
}
