package postgres

import (
	"context"
	"fmt"

	"github.com/dbfork/dbfork/internal/engine"
)

// MakeSlots implements engine.SlotMaker: each slot is a FILE_COPY of the
// build's database. CREATE DATABASE refuses a template with other
// sessions, so those (a run step's leftovers) are ended first. On
// PostgreSQL 18 the copy asks for file_copy_method = clone, a reflink
// where the store shares extents; where it cannot clone, it copies.
// Each slot's files are in base/<its database's oid>.
func (p *Postgres) MakeSlots(ctx context.Context, srv *engine.Server, names []string) ([]string, error) {
	c, err := connect(ctx, srv, "template1")
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", srv.Database); err != nil {
		return nil, err
	}
	clone := p.major() >= 18
	if clone {
		if _, err := c.Exec(ctx, "SET file_copy_method = clone"); err != nil {
			clone = false
		}
	}
	for _, name := range names {
		_, err := c.Exec(ctx, createFrom(srv.Database, name))
		if err != nil && clone && ctx.Err() == nil {
			// The filesystem cannot clone: copy bytes from here on.
			clone = false
			if _, rerr := c.Exec(ctx, "RESET file_copy_method"); rerr == nil {
				_, err = c.Exec(ctx, createFrom(srv.Database, name))
			}
		}
		if err != nil {
			return nil, fmt.Errorf("create slot database %s: %w", name, err)
		}
	}
	dirs := make([]string, len(names))
	for i, name := range names {
		var oid uint32
		if err := c.QueryRow(ctx, "SELECT oid FROM pg_database WHERE datname = $1", name).Scan(&oid); err != nil {
			return nil, fmt.Errorf("find slot database %s: %w", name, err)
		}
		dirs[i] = fmt.Sprintf("base/%d", oid)
	}
	return dirs, nil
}

// WALPosition is the server's WAL insert position: every change to a
// logged table, a catalog or a sequence moves it, so the same position
// at two times says nothing was written in between.
func (p *Postgres) WALPosition(ctx context.Context, srv *engine.Server) (string, error) {
	c, err := connect(ctx, srv, "template1")
	if err != nil {
		return "", err
	}
	defer c.Close(context.Background())
	var at string
	err = c.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&at)
	return at, err
}
