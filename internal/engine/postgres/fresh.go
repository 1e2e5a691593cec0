package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dbfork/dbfork/internal/engine"
)

// major is the server's major version (0 if unknown); the version may
// be "18.6" or "postgres (PostgreSQL) 18.6".
func (p *Postgres) major() int {
	f := strings.Fields(p.version)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(strings.SplitN(f[len(f)-1], ".", 2)[0])
	return n
}

// ClonesDatabases: PostgreSQL 18 added file_copy_method = clone, which
// CREATE DATABASE … STRATEGY FILE_COPY uses to copy a database's files
// (copy_file_range: a reflink on XFS and btrfs). Clones start with it.
func (p *Postgres) ClonesDatabases() bool { return p.major() >= 18 }

// admin runs statements over the server socket, from template1 (a
// connection to the source database would block the copy).
func admin(ctx context.Context, srv *engine.Server, stmts ...string) error {
	c, err := connect(ctx, srv, "template1")
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	for _, q := range stmts {
		if _, err := c.Exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func createFrom(template, name string) string {
	return fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s STRATEGY FILE_COPY", ident(name), ident(template))
}

// MakeTemplate implements engine.DatabaseCloner. One connection to the
// copy, before it is closed to connections, writes its relation cache
// init file (pg_internal.init), which every clone then inherits: a
// client's first connection to a fresh database does not rebuild it.
func (p *Postgres) MakeTemplate(ctx context.Context, srv *engine.Server, name string) error {
	if err := admin(ctx, srv, createFrom(srv.Database, name)); err != nil {
		return fmt.Errorf("make template database %s: %w", name, err)
	}
	c, err := connect(ctx, srv, name)
	if err != nil {
		return fmt.Errorf("make template database %s: %w", name, err)
	}
	_, err = c.Exec(ctx, "SELECT 1")
	c.Close(context.Background())
	if err == nil {
		err = admin(ctx, srv, fmt.Sprintf("ALTER DATABASE %s WITH ALLOW_CONNECTIONS false IS_TEMPLATE true", ident(name)))
	}
	if err != nil {
		return fmt.Errorf("make template database %s: %w", name, err)
	}
	return nil
}

// CloneDatabases implements engine.DatabaseCloner.
func (p *Postgres) CloneDatabases(ctx context.Context, srv *engine.Server, template string, names []string, made func(string)) error {
	c, err := connect(ctx, srv, "template1")
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	for _, name := range names {
		if _, err := c.Exec(ctx, createFrom(template, name)); err != nil {
			return fmt.Errorf("create database %s: %w", name, err)
		}
		if made != nil {
			made(name)
		}
	}
	return nil
}

// DropDatabases implements engine.DatabaseCloner.
func (p *Postgres) DropDatabases(ctx context.Context, srv *engine.Server, names []string) error {
	return eachDatabase(ctx, srv, names, func(c *pgx.Conn, name string) error {
		_, err := c.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", ident(name)))
		return err
	})
}

// CloseDatabases implements engine.DatabaseCloner.
//
// It runs on the fresh call's path (the last test's database closes before
// the next test gets its own), so over the server's admin connection
// (adminconn.go) rather than a new one; drops and clones, in the
// background, keep connections of their own and never wait for it.
func (p *Postgres) CloseDatabases(ctx context.Context, srv *engine.Server, names []string) error {
	return withAdmin(ctx, srv, func(c *pgx.Conn) error {
		return eachOn(ctx, c, names, func(c *pgx.Conn, name string) error { return closeDatabase(ctx, c, name) })
	})
}

// closeDatabase refuses new connections to name and ends the ones it
// has, in one round trip (the fresh call waits on it: at 8 test clients
// on 2 cores each trip waits for the admin backend's turn on a core).
func closeDatabase(ctx context.Context, c *pgx.Conn, name string) error {
	sql := fmt.Sprintf("ALTER DATABASE %s ALLOW_CONNECTIONS false; SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
		ident(name), literal(name))
	if _, err := c.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "3D000" { // invalid_catalog_name: dropped already
			return nil
		}
		return err
	}
	return nil
}

// literal quotes s as an escape string constant (E'...': its meaning does
// not hang on standard_conforming_strings, which a recipe may set).
func literal(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(s) + "'"
}

// eachDatabase runs do for every name over one connection from
// template1; a name that fails does not stop the others.
func eachDatabase(ctx context.Context, srv *engine.Server, names []string, do func(*pgx.Conn, string) error) error {
	c, err := connect(ctx, srv, "template1")
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return eachOn(ctx, c, names, do)
}

// eachOn runs do for every name over c; a name that fails does not stop
// the others, a connection that dies does.
func eachOn(ctx context.Context, c *pgx.Conn, names []string, do func(*pgx.Conn, string) error) error {
	var errsOut []error
	for _, name := range names {
		if err := do(c, name); err != nil {
			if ctx.Err() != nil || c.IsClosed() {
				return err
			}
			errsOut = append(errsOut, fmt.Errorf("database %s: %w", name, err))
		}
	}
	return errors.Join(errsOut...)
}

// SwapDatabase implements engine.DatabaseCloner. A database with
// connections cannot be renamed: they are terminated, and again while
// clients reconnect, until the rename goes through.
func (p *Postgres) SwapDatabase(ctx context.Context, srv *engine.Server, name, with, trash string) error {
	c, err := connect(ctx, srv, "template1")
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	rename := fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", ident(name), ident(trash))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second) // clients reconnecting without end
	defer cancel()
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		if _, err := c.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name); err != nil {
			return fmt.Errorf("swap database %s: %w", name, err)
		}
		_, err := c.Exec(ctx, rename)
		if err == nil {
			break
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "55006" { // object_in_use
			return fmt.Errorf("swap database %s: %w", name, err)
		}
		retry.Reset(2 * time.Millisecond)
		select {
		case <-ctx.Done():
			return fmt.Errorf("swap database %s: its connections keep coming back: %w", name, ctx.Err())
		case <-retry.C:
		}
	}
	if _, err := c.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", ident(with), ident(name))); err != nil {
		// Put the old one back rather than leave no database at all.
		_, _ = c.Exec(context.Background(), fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", ident(trash), ident(name)))
		return fmt.Errorf("swap database %s: %w", name, err)
	}
	return nil
}

// ConnTo implements engine.DatabaseCloner.
func (p *Postgres) ConnTo(srv *engine.Server, name string) engine.Conn {
	s := *srv
	s.Database = name
	return p.Conn(&s)
}
