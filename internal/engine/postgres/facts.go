package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/internal/engine"
)

// MemoryPerInstance is what one test instance takes: a server with small
// shared_buffers and a few backends.
const MemoryPerInstance = 48 << 20

// RelationNames maps data-dir paths (base/OID/FILENODE[.N|_fsm|_vm]) to
// table names, from the running instance's catalog (its own database
// only). Best effort: unknown paths, or no server, get no name.
func RelationNames(ctx context.Context, conn *engine.Conn, alive bool) func(string) string {
	none := func(string) string { return "" }
	if conn == nil || !alive {
		return none
	}
	c, err := pgx.Connect(ctx, conn.URL)
	if err != nil {
		return none
	}
	defer c.Close(context.Background())
	var dbOID uint32
	if err := c.QueryRow(ctx, "SELECT oid FROM pg_database WHERE datname = current_database()").Scan(&dbOID); err != nil {
		return none
	}
	rows, err := c.Query(ctx, "SELECT pg_relation_filenode(oid)::text, relname FROM pg_class WHERE pg_relation_filenode(oid) IS NOT NULL")
	if err != nil {
		return none
	}
	byNode := map[string]string{}
	for rows.Next() {
		var node, name string
		if rows.Scan(&node, &name) == nil {
			byNode[node] = name
		}
	}
	rows.Close()
	prefix := fmt.Sprintf("base/%d/", dbOID)
	return func(p string) string {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			return ""
		}
		// 16384, 16384.1 (segments), 16384_fsm, 16384_vm
		node := strings.FieldsFunc(rest, func(r rune) bool { return r == '.' || r == '_' })
		if len(node) == 0 {
			return ""
		}
		name := byNode[node[0]]
		if name != "" && strings.Contains(rest, "_") {
			name += " (" + rest[strings.IndexByte(rest, '_')+1:] + ")"
		}
		return name
	}
}
