package mysql

import (
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	cases := []struct {
		out     string
		flavor  Flavor
		version string
	}{
		{"/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)\n", MariaDB, "10.11.19"},
		{"/usr/sbin/mysqld  Ver 10.6.16-MariaDB-0ubuntu0.22.04.1 for debian-linux-gnu on x86_64 (Ubuntu 22.04)", MariaDB, "10.6.16"},
		{"/usr/sbin/mysqld  Ver 8.0.36-0ubuntu0.22.04.1 for Linux on x86_64 ((Ubuntu))", MySQL, "8.0.36"},
		{"/usr/local/mysql/bin/mysqld  Ver 8.4.0 for Linux on x86_64 (MySQL Community Server - GPL)", MySQL, "8.4.0"},
	}
	for _, c := range cases {
		info, err := ParseVersion(c.out)
		if err != nil || info.Flavor != c.flavor || info.Version != c.version {
			t.Errorf("%q: got %+v %v", c.out, info, err)
		}
	}
	// The line is part of a golden's key: the same build unpacked in two
	// engine caches gives one line.
	a, _ := ParseVersion("/var/cache/a/mariadb-11.4.5-amd64/bin/mariadbd  Ver 11.4.5-MariaDB for Linux on x86_64 (MariaDB Server)")
	b, _ := ParseVersion("/home/u/.local/share/dbfork/engines/mariadb-11.4.5-amd64/bin/mariadbd  Ver 11.4.5-MariaDB for Linux on x86_64 (MariaDB Server)\n")
	if a.Line != b.Line || a.Line != "mariadbd  Ver 11.4.5-MariaDB for Linux on x86_64 (MariaDB Server)" {
		t.Errorf("version lines differ by install path: %q vs %q", a.Line, b.Line)
	}
	if _, err := ParseVersion("postgres (PostgreSQL) 15.18"); err == nil {
		t.Error("a PostgreSQL version parsed as MySQL")
	}
}

func TestFlavorDifferences(t *testing.T) {
	maria := ServerInfo{Flavor: MariaDB, Version: "10.11.19"}
	my84 := ServerInfo{Flavor: MySQL, Version: "8.4.0"}
	my80old := ServerInfo{Flavor: MySQL, Version: "8.0.20"}

	if a := strings.Join(initArgs(maria, "/d"), " "); !strings.Contains(a, "--auth-root-authentication-method=normal") || strings.Contains(a, "--initialize") {
		t.Errorf("mariadb init args: %s", a)
	}
	if a := strings.Join(initArgs(my84, "/d"), " "); !strings.Contains(a, "--initialize-insecure") || !strings.Contains(a, "--innodb-redo-log-capacity=16M") {
		t.Errorf("mysql 8.4 init args: %s", a)
	}
	if a := strings.Join(innodbLayout(my80old, false), " "); !strings.Contains(a, "--innodb-log-file-size=8M") {
		t.Errorf("mysql 8.0.20 layout: %s", a)
	}
	if sql := afterStartSQL(my84, true); len(sql) != 1 || !strings.Contains(sql[0], "DISABLE INNODB REDO_LOG") {
		t.Errorf("mysql 8.4 should disable its redo log in the test profile: %v", sql)
	}
	for _, info := range []ServerInfo{maria, my80old} {
		if sql := afterStartSQL(info, true); len(sql) != 0 {
			t.Errorf("%+v cannot disable its redo log, got %v", info, sql)
		}
	}
	if sql := afterStartSQL(my84, false); len(sql) != 0 {
		t.Errorf("a build server must keep its redo log: %v", sql)
	}
	test := strings.Join(profileArgs(maria, true), " ")
	for _, want := range []string{"--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", "--sync-binlog=0", "--skip-log-bin", "--performance-schema=0"} {
		if !strings.Contains(test, want) {
			t.Errorf("test profile lacks %s", want)
		}
	}
	if strings.Contains(test, "--innodb-log-file-size=512M") {
		t.Error("a larger redo log is preallocated in every clone: private disk the issue forbids")
	}
	for _, want := range []string{"--skip-ssl", "--innodb-io-capacity=1000"} {
		if !strings.Contains(test, want) {
			t.Errorf("mariadb test profile lacks %s: %s", want, test)
		}
	}
	for _, want := range []string{"--innodb-max-dirty-pages-pct-lwm=10", "--innodb-flush-neighbors=0", "--innodb-flush-method=fsync"} {
		if !strings.Contains(test, want) {
			t.Errorf("mariadb 10.11 test profile lacks %s: %s", want, test)
		}
	}
	maria11 := strings.Join(profileArgs(ServerInfo{Flavor: MariaDB, Version: "11.4.5"}, true), " ")
	if !strings.Contains(maria11, "--innodb-data-file-buffering=ON") || strings.Contains(maria11, "flush-method") {
		t.Errorf("mariadb 11.4 buffers page writes with innodb_data_file_buffering (innodb_flush_method is deprecated): %s", maria11)
	}
	for mem, want := range map[uint64]string{1 << 30: "=64M", 8 << 30: "=256M", 64 << 30: "=512M", 0: "=64M"} {
		if a := strings.Join(mariadbTestProfile(maria, mem), " "); !strings.Contains(a, "--innodb-buffer-pool-size"+want) {
			t.Errorf("buffer pool for %d bytes of memory: %s, want %s", mem, a, want)
		}
	}
	if safe := strings.Join(profileArgs(maria, false), " "); strings.Contains(safe, "flush-log-at-trx-commit") || strings.Contains(safe, "doublewrite") {
		t.Errorf("safe profile turns durability off: %s", safe)
	}
	if strings.Contains(strings.Join(profileArgs(my84, true), " "), "change-buffering") {
		t.Error("MySQL 8.4 has no innodb_change_buffering=none option to pass")
	}
}

func TestVersionCompare(t *testing.T) {
	v := ServerInfo{Version: "8.0.30"}
	if !v.AtLeast(8, 0, 30) || !v.AtLeast(8, 0, 21) || v.AtLeast(8, 0, 31) || v.AtLeast(8, 1, 0) || !v.AtLeast(5, 7, 99) {
		t.Fatal("AtLeast is wrong")
	}
}

func TestOwnerSQLQuotes(t *testing.T) {
	sql := strings.Join(lockedUserSQL("we`ird", "db"), ";")
	if !strings.Contains(sql, "`we``ird`@'127.0.0.1' IDENTIFIED BY '' ACCOUNT LOCK") {
		t.Fatalf("owner not quoted or not locked over TCP: %s", sql)
	}
}
