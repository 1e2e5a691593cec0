package engine

import (
	"fmt"
	"testing"
)

func TestErrorLineFindsTheError(t *testing.T) {
	for _, c := range []struct{ out, want string }{
		{"Operations to perform:\nCommandError: Conflicting migrations detected\nSystem check identified some issues:\nWARNINGS:\nHINT: Configure the DEFAULT_AUTO_FIELD setting\n", "CommandError: Conflicting migrations detected"},
		{"Traceback (most recent call last):\n  File \"manage.py\", line 3, in <module>\n    import django\nImportError: Couldn't import Django\n", "ImportError: Couldn't import Django"},
		{"psql:x.sql:3: ERROR:  relation \"foo\" does not exist\nLINE 1: select * from foo\nHINT: x\n", "psql:x.sql:3: ERROR:  relation \"foo\" does not exist"},
		{"sh: 1: prisma: command not found\n", "sh: 1: prisma: command not found"},
		{"all fine\nexit now", ""},
	} {
		var e errorLine
		// Written in odd pieces, as a pipe delivers them.
		for i := 0; i < len(c.out); i += 7 {
			end := min(i+7, len(c.out))
			fmt.Fprint(&e, c.out[i:end])
		}
		if got := e.String(); got != c.want {
			t.Errorf("output %q: error line %q, want %q", c.out, got, c.want)
		}
	}
}
