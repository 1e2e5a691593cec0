package engine

import "database/sql"

// BenchKit is what `dbfork bench` needs to know of an engine, so the
// measurement harness names no engine: a dataset the server makes itself,
// and the ways a test reaches a clone (a client command line, a Go
// driver). The engines registry holds one per engine.
type BenchKit struct {
	// Dataset is SQL that makes about size bytes of data, the largest
	// table (where first writes go) and its row count.
	Dataset func(size int64) (sql, table string, rows int64)
	// Insert is the client command line a test script would run to insert
	// the i-th new row into table (which holds rows rows), and the
	// environment it needs beyond this process's; db "" is the clone's
	// own database.
	Insert func(env map[string]string, db, table string, rows int64, i int) (argv, extraEnv []string)
	// Update is a single-row update of table by key (one placeholder).
	Update func(table string) string
	// OpenDB opens a Go handle on the database url names (a clone's
	// Conn.URL, or one of its databases), given the clone's client env.
	OpenDB func(url string, env map[string]string) (*sql.DB, error)
	// TemplateStrategies are the CREATE DATABASE … TEMPLATE strategies
	// the bench compares against (none: no such baseline).
	TemplateStrategies []string
	// AdminDatabase is a database to connect to while another is copied.
	AdminDatabase string
	// CreateFromTemplate is the statement copying template to name.
	CreateFromTemplate func(name, template, strategy string) string
	// DatabaseSize is a query of one database's size in bytes ($1: name).
	DatabaseSize string
}
