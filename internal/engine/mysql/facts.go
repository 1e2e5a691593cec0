package mysql

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/dbfork/dbfork/internal/engine"
)

// MemoryPerInstance is what one test instance takes: a server and its log
// buffers, with the test profile's buffer pool (sized to the machine, up
// to 512 MiB, but allocated only as pages are read: a short test stays
// near this figure; a long write-heavy one can grow by the pool's size).
const MemoryPerInstance = 192 << 20

// RelationNames maps data-dir paths to table names: InnoDB files are named
// after their tables (DB/TABLE.ibd); no server is needed.
func RelationNames(context.Context, *engine.Conn, bool) func(string) string {
	return func(p string) string {
		dir, file := filepath.Split(p)
		if dir == "" || !strings.HasSuffix(file, ".ibd") {
			return ""
		}
		return strings.TrimSuffix(dir, "/") + "." + strings.TrimSuffix(file, ".ibd")
	}
}
