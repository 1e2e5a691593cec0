// Package mysql runs MariaDB and MySQL servers for dbfork. The two differ
// in how a data dir is initialised, which settings exist, and whether the
// redo log can be switched off; those differences live in this file as
// small functions with unit tests, so the MySQL paths are checked even on
// machines (like Debian's CI) where only MariaDB is installable.
package mysql

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/dbfork/dbfork/internal/proc"
)

// Flavor is MariaDB or MySQL.
type Flavor string

const (
	MariaDB Flavor = "mariadb"
	MySQL   Flavor = "mysql"
)

// ServerInfo is what `mysqld --version` says.
type ServerInfo struct {
	Flavor  Flavor
	Version string // "10.11.19" / "8.0.36"
	Line    string // the whole version line: part of the golden key
}

var versionRe = regexp.MustCompile(`Ver ([0-9]+\.[0-9]+\.[0-9]+)(-MariaDB)?`)

// ParseVersion reads `mariadbd --version` / `mysqld --version` output.
func ParseVersion(out string) (ServerInfo, error) {
	line := strings.TrimSpace(out)
	loc := versionRe.FindStringSubmatchIndex(line)
	if loc == nil {
		return ServerInfo{}, fmt.Errorf("unrecognised server version %q", line)
	}
	m := versionRe.FindStringSubmatch(line)
	// The line starts with the program as it was run: a fetched build's
	// path names the engine cache it sits in, and the line is part of a
	// golden's key, so only the program's name is kept (the same build
	// in two stores gives the same key).
	if prog := strings.TrimSpace(line[:loc[0]]); prog != "" {
		line = filepath.Base(prog) + "  " + line[loc[0]:]
	}
	info := ServerInfo{Flavor: MySQL, Version: m[1], Line: line}
	if m[2] != "" || strings.Contains(line, "MariaDB") {
		info.Flavor = MariaDB
	}
	return info, nil
}

// AtLeast compares the dotted version with major.minor.patch.
func (i ServerInfo) AtLeast(major, minor, patch int) bool {
	parts := strings.SplitN(i.Version, ".", 3)
	var v [3]int
	for k := range parts {
		v[k], _ = strconv.Atoi(parts[k])
	}
	for k, want := range [3]int{major, minor, patch} {
		if v[k] != want {
			return v[k] > want
		}
	}
	return true
}

// Golden layout choices, part of the key. A default golden has a ~96 MiB
// (MariaDB) or 2x48 MiB (MySQL) redo log and undo logs inside ibdata1;
// a clone rewrites both on its first write, and OverlayFS copies whole
// files up. Separate undo tablespaces keep that first-write cost small;
// file-per-table (the default) keeps tables apart.
//
// The redo log: a build loads with a small one (buildRedoLog); MariaDB
// goldens are then sealed (seal.go) with the larger log clones run with
// (cloneRedoLog), stored sparse. A 16 MiB log was full within seconds of
// a write-heavy test and every write then waited for a forced checkpoint
// (issue 16: sysbench oltp_write_only stalled 150-500 ms every second with
// the checkpoint age pinned at its maximum).
const (
	buildRedoLog    = "16M"
	cloneRedoLog    = "256M"
	undoTablespaces = "3"
)

// initArgs are the arguments of the tool that creates a data dir.
func initArgs(info ServerInfo, dataDir string) []string {
	common := []string{"--datadir=" + dataDir}
	switch info.Flavor {
	case MariaDB:
		return append([]string{"--no-defaults"}, append(common,
			"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve",
			"--innodb-log-file-size="+buildRedoLog, "--innodb-undo-tablespaces="+undoTablespaces,
			"--innodb-buffer-pool-dump-at-shutdown=0", "--innodb-change-buffering=none")...)
	default:
		args := append([]string{"--no-defaults", "--initialize-insecure"}, common...)
		return append(args, innodbLayout(info, false)...)
	}
}

// innodbLayout are the settings that must match between a data dir and
// every server started on it: build servers (building) load with the
// small redo log, servers on a sealed golden run with the clones' one.
func innodbLayout(info ServerInfo, building bool) []string {
	switch {
	case info.Flavor == MariaDB:
		redo := cloneRedoLog
		if building || !sealed(info) {
			redo = buildRedoLog
		}
		return []string{"--innodb-log-file-size=" + redo, "--innodb-undo-tablespaces=" + undoTablespaces}
	case info.AtLeast(8, 0, 30):
		return []string{"--innodb-redo-log-capacity=16M"}
	default:
		return []string{"--innodb-log-file-size=8M", "--innodb-log-files-in-group=2"}
	}
}

// profileArgs are the server settings of a profile: the test profile turns
// durability off and memory down, changing no query result.
func profileArgs(info ServerInfo, test bool) []string {
	args := []string{
		"--skip-log-bin", "--skip-name-resolve", "--performance-schema=0",
		"--innodb-buffer-pool-load-at-startup=0", "--innodb-buffer-pool-dump-at-shutdown=0",
	}
	if info.Flavor == MariaDB {
		// --skip-ssl: MariaDB 11.4 otherwise makes itself a TLS
		// certificate at every start (10-13 s here); servers listen on
		// loopback only.
		args = append(args, "--innodb-change-buffering=none", "--skip-ssl")
	}
	if !test {
		return args
	}
	args = append(args, "--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", "--sync-binlog=0")
	if info.Flavor == MySQL {
		return append(args, "--innodb-buffer-pool-size=64M", "--skip-mysqlx")
	}
	return append(args, mariadbTestProfile(info, proc.MemInfo("MemTotal"))...)
}

// mariadbTestProfile fights the write stalls of issue 16 item 5 (with a
// 64 MiB buffer pool and innodb_io_capacity=200, sysbench's write-only
// run stalled for ~0.5 s whenever a checkpoint had to flush the pile of
// dirty pages at once):
//   - a buffer pool sized to the machine (1/32 of its memory, 64 MiB to
//     512 MiB), allocated only as pages are read;
//   - a page cleaner that works all along: with the default
//     innodb_max_dirty_pages_pct_lwm=0 MariaDB's page cleaner sleeps until
//     the checkpoint age reaches the log's asynchronous flush point (7/8
//     full) and then flushes everything at once (150-1200 ms stalls on a
//     256 MiB log after ~15 s of sysbench); any non-zero value wakes it
//     every second, so adaptive flushing keeps the checkpoint age low;
//   - at a moderate pace: innodb_io_capacity 1000 (default 200) scales
//     the adaptive rate (~1,100-1,700 pages/s here, the checkpoint age
//     steady at a third of the log); 5000 flushed 4,000-5,000 pages/s and
//     cost a third of the throughput on two cores. The cap for forced
//     flushing stays high (innodb_io_capacity_max 10000);
//   - page writes through the page cache (durability is off anyway) and
//     without neighbours (pages of the same extent, written only to save
//     seeks on spinning disks).
//
// The redo log is the sealed golden's (cloneRedoLog, see seal.go): a
// larger one set in [settings] would be created by each clone's server at
// start and preallocated in full (private disk per clone).
func mariadbTestProfile(info ServerInfo, memBytes uint64) []string {
	bp := memBytes / 32
	bp = max(64<<20, min(bp, 512<<20))
	args := []string{fmt.Sprintf("--innodb-buffer-pool-size=%dM", bp>>20),
		"--innodb-io-capacity=1000", "--innodb-io-capacity-max=10000",
		"--innodb-max-dirty-pages-pct-lwm=10", "--innodb-flush-neighbors=0"}
	if info.AtLeast(11, 0, 1) { // innodb_flush_method is deprecated there
		return append(args, "--innodb-data-file-buffering=ON")
	}
	return append(args, "--innodb-flush-method=fsync")
}

// afterStartSQL are statements run as root once a test server is up:
// MySQL 8.0.21+ can switch its redo log off; MariaDB has no such switch.
func afterStartSQL(info ServerInfo, test bool) []string {
	if test && info.Flavor == MySQL && info.AtLeast(8, 0, 21) {
		return []string{"ALTER INSTANCE DISABLE INNODB REDO_LOG"}
	}
	return nil
}

// lockedUserSQL creates the recipe's owner: over the socket without a
// password (the socket dir is private), over 127.0.0.1 locked until an
// instance sets its own password.
func lockedUserSQL(owner, database string) []string {
	q := quoteIdent(owner)
	return []string{
		"CREATE DATABASE IF NOT EXISTS " + quoteIdent(database),
		fmt.Sprintf("CREATE USER %s@'localhost' IDENTIFIED BY ''", q),
		fmt.Sprintf("CREATE USER %s@'127.0.0.1' IDENTIFIED BY '' ACCOUNT LOCK", q),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO %s@'localhost' WITH GRANT OPTION", q),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO %s@'127.0.0.1' WITH GRANT OPTION", q),
	}
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// unlockSQL gives the owner's TCP account an instance's password.
func unlockSQL(owner, password string) string {
	return fmt.Sprintf("ALTER USER %s@'127.0.0.1' IDENTIFIED BY '%s' ACCOUNT UNLOCK", quoteIdent(owner), strings.ReplaceAll(password, "'", "''"))
}
