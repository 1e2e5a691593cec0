package postgres

import "testing"

// The setting names PostgreSQL's config lexer would read, however they
// are spelled.
func TestConfRunsCode(t *testing.T) {
	for conf, want := range map[string]string{
		"Restore_Command='x'":                         "restore_command",
		"\f archive_command\f= 'x'":                   "archive_command",
		"session_preload_libraries 'x'":               "session_preload_libraries",
		"include_if_exists = 'x'":                     "include_if_exists",
		"# restore_command = 'x'\nwork_mem = '4MB'\n": "",
		"restore_command_x = 1":                       "",
	} {
		if got := confRunsCode(conf); got != want {
			t.Errorf("%q: got %q, want %q", conf, got, want)
		}
	}
}
