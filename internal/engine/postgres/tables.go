package postgres

import (
	"context"
	"os"
	"path/filepath"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
)

// TableFiles names the files of tables, their indexes and TOAST data,
// with every 1 GiB segment and the free-space and visibility maps.
func (p *Postgres) TableFiles(ctx context.Context, srv *engine.Server, tables []string) ([]string, error) {
	c, err := connect(ctx, srv, srv.Database)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	var out []string
	for _, t := range tables {
		rows, err := c.Query(ctx, `
			WITH r AS (SELECT $1::regclass::oid AS oid)
			SELECT pg_relation_filepath(c.oid) FROM pg_class c, r
			 WHERE c.oid = r.oid
			    OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = r.oid)
			    OR c.oid = (SELECT reltoastrelid FROM pg_class WHERE oid = r.oid)
			    OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = (SELECT reltoastrelid FROM pg_class WHERE oid = r.oid))`, t)
		if err != nil {
			return nil, errs.Invalid("hot table %q: %w", t, err)
		}
		var bases []string
		for rows.Next() {
			var p *string
			if err := rows.Scan(&p); err == nil && p != nil {
				bases = append(bases, *p)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, errs.Invalid("hot table %q: %w", t, err)
		}
		for _, b := range bases {
			for _, pat := range []string{b, b + ".*", b + "_fsm", b + "_vm"} {
				m, _ := filepath.Glob(filepath.Join(srv.Outside(srv.DataDir), pat))
				for _, f := range m {
					if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
						rel, _ := filepath.Rel(srv.Outside(srv.DataDir), f)
						out = append(out, rel)
					}
				}
			}
		}
		if len(bases) == 0 {
			return nil, errs.Invalid("hot table %q has no files", t)
		}
	}
	return out, nil
}

// PageSize is PostgreSQL's block size (BLCKSZ; Debian and upstream builds
// keep the 8 KiB default).
func (p *Postgres) PageSize() uint32 { return 8192 }
