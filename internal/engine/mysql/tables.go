package mysql

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
)

// TableFiles names the .ibd files of tables ("table" in the instance's
// database, or "db.table"); InnoDB keeps a table and its indexes in one
// file per table.
func (e *Engine) TableFiles(ctx context.Context, srv *engine.Server, tables []string) ([]string, error) {
	var out []string
	for _, t := range tables {
		db, table, ok := strings.Cut(t, ".")
		if !ok {
			db, table = srv.Database, t
		}
		rel := filepath.Join(db, table+".ibd")
		if strings.Contains(db, "/") || strings.Contains(table, "/") || strings.HasPrefix(db, ".") {
			return nil, errs.Invalid("hot table %q: not a table name", t)
		}
		if fi, err := os.Stat(filepath.Join(srv.Outside(srv.DataDir), rel)); err != nil || !fi.Mode().IsRegular() {
			return nil, errs.Invalid("hot table %q: no file %s in the data dir (a file-per-table InnoDB table?)", t, rel)
		}
		out = append(out, rel)
	}
	return out, nil
}

// PageSize is InnoDB's default page size (innodb_page_size), which dbfork
// goldens keep.
func (e *Engine) PageSize() uint32 { return 16384 }
