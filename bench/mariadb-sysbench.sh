#!/usr/bin/env bash
# sysbench oltp_write_only on fresh MariaDB clones through dbfork itself:
# seed 000's workload (TABLES x ROWS rows, 1 thread, SECONDS s). The golden
# is built once per version by `sysbench prepare`; each profile is the
# recipe's [settings] (instances only, not part of the key), each run a
# fresh `dbfork up`, the sysbench run, `dbfork down`. Prints one line per
# run: backend, profile, clone+ready ms, tps, p95 and max latency, and the
# machine's load average (figures from a busy machine are not comparable).
#   sudo bench/mariadb-sysbench.sh STORE VERSION BACKEND RUNS PROFILE...
# PROFILE is a name from the table below. Example:
#   sudo bench/mariadb-sysbench.sh /var/lib/dbfork-bench 10.11 reflink 3 old new
set -euo pipefail
STORE="$1" VERSION="$2" BACKEND="$3" RUNS="$4"; shift 4
D="${DBFORK:-$(cd "$(dirname "$0")/.." && pwd)/bin/dbfork}"
TABLES="${TABLES:-7}" ROWS="${ROWS:-1000000}" SECONDS_="${SECONDS_:-20}"
WORK="${WORK:-/tmp/dbfork-sysbench-$VERSION}"

settings() {
  case "$1" in
    old) # the test profile before issue 16: 16 MiB redo log, 64 MiB buffer pool
      printf 'innodb_log_file_size = "16M"\ninnodb_buffer_pool_size = "64M"\ninnodb_io_capacity = "200"\ninnodb_flush_method = "O_DIRECT"\n' ;;
    new) ;; # the test profile dbfork passes today (sealed 256 MiB redo log)
    log16) echo 'innodb_log_file_size = "16M"' ;;   # today's profile with the 16 MiB redo log of before the seal
    redo) echo 'innodb_log_file_size = "512M"' ;;
    log64) echo 'innodb_log_file_size = "64M"' ;;   # today's profile with a 64 MiB redo log (preallocated per clone)
    bp) echo 'innodb_buffer_pool_size = "512M"' ;;
    redobp) printf 'innodb_log_file_size = "512M"\ninnodb_buffer_pool_size = "512M"\n' ;;
    io) printf 'innodb_log_file_size = "512M"\ninnodb_buffer_pool_size = "512M"\ninnodb_io_capacity = "5000"\ninnodb_io_capacity_max = "10000"\n' ;;
    nosync) printf 'innodb_log_file_size = "512M"\ninnodb_buffer_pool_size = "512M"\ninnodb_flush_method = "nosync"\n' ;;
    *) echo "unknown profile $1" >&2; exit 2 ;;
  esac
}

mkdir -p "$WORK"
recipe() {
  cat > "$WORK/dbfork.toml" <<EOF
engine = "mariadb"
version = "$VERSION"
database = "sbtest"
owner = "sbtest"
[[load]]
run = "env -u MYSQL_PWD sysbench oltp_write_only --db-driver=mysql --mysql-socket=\$MYSQL_UNIX_PORT --mysql-user=\$MYSQL_USER --mysql-db=\$MYSQL_DATABASE --tables=$TABLES --table-size=$ROWS prepare >/dev/null"
[settings]
$(settings "$1")
EOF
}

recipe old
(cd "$WORK" && "$D" --store "$STORE" build >/dev/null)
# Profiles take turns (run 1 of each, then run 2 of each, ...), so a
# machine that gets busier or quieter does not favour one of them.
for r in $(seq 1 "$RUNS"); do
  for p in "$@"; do
    recipe "$p"
    out="$(cd "$WORK" && "$D" --store "$STORE" up --backend "$BACKEND" --json)"
    id="$(sed -n 's/.*"id": "\(.*\)".*/\1/p' <<<"$out" | head -1)"
    ready="$(sed -n 's/.*"ready_ms": \([0-9.]*\).*/\1/p' <<<"$out")"
    eval "$(sed -n 's/.*"\(MYSQL_[A-Z]*\)": "\(.*\)".*/export \1=\2/p' <<<"$out")"
    res="$(sysbench oltp_write_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$MYSQL_PORT" \
      --mysql-user="$MYSQL_USER" --mysql-password="$MYSQL_PWD" --mysql-db="$MYSQL_DATABASE" \
      --tables="$TABLES" --table-size="$ROWS" --threads=1 --time="$SECONDS_" --percentile=95 run)"
    "$D" --store "$STORE" down "$id" >/dev/null
    tps="$(sed -n 's/.*transactions: *[0-9]* *(\([0-9.]*\) per sec.*/\1/p' <<<"$res")"
    p95="$(sed -n 's/.*95th percentile: *\([0-9.]*\).*/\1/p' <<<"$res")"
    max="$(sed -n 's/.*max: *\([0-9.]*\).*/\1/p' <<<"$res")"
    printf '%s %-8s %-6s run %d  ready %6.0f ms  tps %7.1f  p95 %6.2f ms  max %7.2f ms  load %s\n' \
      "$VERSION" "$BACKEND" "$p" "$r" "$ready" "$tps" "$p95" "$max" "$(cut -d' ' -f1 /proc/loadavg)"
  done
done
