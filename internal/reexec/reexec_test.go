package reexec

import "testing"

func TestRunPicksTheNamedHelper(t *testing.T) {
	var got []string
	Register("__dbfork-test-helper", func(args []string) int { got = args; return 7 })
	if code, ok := run([]string{"bin", "__dbfork-test-helper", "a", "b"}); !ok || code != 7 || len(got) != 2 || got[1] != "b" {
		t.Errorf("helper not run as asked: ok=%v code=%d args=%q", ok, code, got)
	}
	for _, argv := range [][]string{{"bin"}, {"bin", "up"}, {"bin", "-test.run=X"}} {
		if _, ok := run(argv); ok {
			t.Errorf("%q ran a helper", argv)
		}
	}
}
