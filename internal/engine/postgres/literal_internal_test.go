package postgres

import "testing"

// TestLiteral: a database name with quotes and backslashes stays one
// string constant in the close statement, whatever
// standard_conforming_strings says.
func TestLiteral(t *testing.T) {
	for in, want := range map[string]string{
		"slot_000":    `E'slot_000'`,
		`a'b`:         `E'a''b'`,
		`a\'; drop x`: `E'a\\''; drop x'`,
	} {
		if got := literal(in); got != want {
			t.Errorf("literal(%q) = %s, want %s", in, got, want)
		}
	}
}
