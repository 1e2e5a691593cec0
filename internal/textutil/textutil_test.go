package textutil

import "testing"

func TestOneLine(t *testing.T) {
	for _, c := range []struct {
		in, sep string
		max     int
		want    string
	}{
		{"  ERROR:  relation\n\t\"x\" does not exist\n", " ", 0, `ERROR: relation "x" does not exist`},
		{"mount: wrong fs type\nbad superblock\n", "; ", 0, "mount: wrong fs type; bad superblock"},
		{"abcdefghij", " ", 8, "abcde..."},
		{"abcdefgh", " ", 8, "abcdefgh"},
	} {
		if got := OneLine(c.in, c.sep, c.max); got != c.want {
			t.Errorf("OneLine(%q, %q, %d) = %q, want %q", c.in, c.sep, c.max, got, c.want)
		}
	}
}
