package mysql

import (
	"errors"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/errs"
)

// Option files in a pulled data dir that would run SQL, load plugins or
// include other files are refused; others pass.
func TestCheckArtifactOptionFiles(t *testing.T) {
	e := &Engine{}
	for text, want := range map[string]string{
		"[mysqld]\ninit-file=/tmp/evil.sql\n":                  "init_file",
		"[mariadbd]\n  loose-plugin-load-add = evil.so\n":      "plugin_load_add",
		"!includedir /home/someone/conf\n":                     "!include",
		`{"mysql_server": {"init_connect": {"Value": "x"}}}`:   "init_connect",
		"[auto]\nserver-uuid=5c1b-4e\n":                        "",
		"[mysqld]\n# init-file is not set here\nport = 3306\n": "",
	} {
		err := e.CheckArtifact([]string{"base/x", "my.cnf"}, func(rel string) ([]byte, error) {
			if rel != "my.cnf" {
				t.Fatalf("read %s, which is no option file", rel)
			}
			return []byte(text), nil
		})
		if want == "" {
			if err != nil {
				t.Errorf("%q refused: %v", text, err)
			}
			continue
		}
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want a refusal naming %s", text, err, want)
		}
	}
}
