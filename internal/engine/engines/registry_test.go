package engines

import "testing"

func TestOlderThan(t *testing.T) {
	for _, c := range []struct {
		v, oldest string
		want      bool
	}{{"9", "11", true}, {"9.6", "11", true}, {"10", "11", true}, {"11", "11", false}, {"16.4", "11", false}, {"x", "11", false}} {
		if got := olderThan(c.v, c.oldest); got != c.want {
			t.Errorf("olderThan(%q, %q) = %v", c.v, c.oldest, got)
		}
	}
}
