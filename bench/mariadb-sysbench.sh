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
# TRACE=1 also writes, per run, sysbench's per-second figures
# (--report-interval=1 --percentile=100: tps and that second's maximum)
# beside the server's checkpoint age, dirty pages and pages flushed each
# second to $WORK/trace-VERSION-PROFILE-RUN.txt.
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
    lwm) echo 'innodb_max_dirty_pages_pct_lwm = "10"' ;;
    lwmnb) printf 'innodb_max_dirty_pages_pct_lwm = "10"\ninnodb_flush_neighbors = "0"\n' ;;
    buf) echo 'innodb_flush_method = "fsync"' ;;   # 10.11: page writes through the page cache
    lwmbuf) printf 'innodb_max_dirty_pages_pct_lwm = "10"\ninnodb_flush_neighbors = "0"\ninnodb_flush_method = "fsync"\n' ;;
    lwmbuf11) printf 'innodb_max_dirty_pages_pct_lwm = "10"\ninnodb_flush_neighbors = "0"\ninnodb_data_file_buffering = "ON"\n' ;; # 11.x: as lwmbuf
    lwm30buf) printf 'innodb_max_dirty_pages_pct_lwm = "30"\ninnodb_flush_neighbors = "0"\ninnodb_flush_method = "fsync"\n' ;;
    log1g) echo 'innodb_log_file_size = "1G"' ;;
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

# trace_status prints, every second, InnoDB's checkpoint age (MB), its
# limit, dirty pages and the pages flushed since the previous second.
trace_status() {
  local prev=0 t=0
  echo "t checkpoint_age_MB max_MB dirty_pages flushed_per_s flushed_total" > "$1"
  while sleep 1; do
    t=$((t + 1))
    mariadb --no-defaults --skip-ssl -h 127.0.0.1 -P "$MYSQL_PORT" -u "$MYSQL_USER" -p"$MYSQL_PWD" -N -B -e \
      "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_checkpoint_age','Innodb_checkpoint_max_age','Innodb_buffer_pool_pages_dirty','Innodb_buffer_pool_pages_flushed')" 2>/dev/null |
      awk -v t="$t" -v prev="$prev" '{v[$1]=$2} END {printf "%d %.1f %.1f %d %d %d\n", t, v["Innodb_checkpoint_age"]/1048576, v["Innodb_checkpoint_max_age"]/1048576, v["Innodb_buffer_pool_pages_dirty"], v["Innodb_buffer_pool_pages_flushed"]-prev, v["Innodb_buffer_pool_pages_flushed"]}' >> "$1"
    prev="$(tail -1 "$1" | cut -d' ' -f6)"
  done
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
    extra=() tracer=""
    if [ -n "${TRACE:-}" ]; then
      extra=(--report-interval=1 --percentile=100)
      trace_status "$WORK/status-$VERSION-$p-$r.txt" & tracer=$!
    fi
    res="$(sysbench oltp_write_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$MYSQL_PORT" \
      --mysql-user="$MYSQL_USER" --mysql-password="$MYSQL_PWD" --mysql-db="$MYSQL_DATABASE" \
      --tables="$TABLES" --table-size="$ROWS" --threads=1 --time="$SECONDS_" --percentile=95 "${extra[@]}" run)"
    if [ -n "$tracer" ]; then
      kill "$tracer"; wait "$tracer" 2>/dev/null || true
      { grep '^\[' <<<"$res"; cat "$WORK/status-$VERSION-$p-$r.txt"; } > "$WORK/trace-$VERSION-$p-$r.txt"
    fi
    "$D" --store "$STORE" down "$id" >/dev/null
    tps="$(sed -n 's/.*transactions: *[0-9]* *(\([0-9.]*\) per sec.*/\1/p' <<<"$res")"
    p95="$(sed -n 's/.*95th percentile: *\([0-9.]*\).*/\1/p' <<<"$res")"
    max="$(sed -n 's/.*max: *\([0-9.]*\).*/\1/p' <<<"$res")"
    printf '%s %-8s %-6s run %d  ready %6.0f ms  tps %7.1f  p95 %6.2f ms  max %7.2f ms  load %s\n' \
      "$VERSION" "$BACKEND" "$p" "$r" "$ready" "$tps" "$p95" "$max" "$(cut -d' ' -f1 /proc/loadavg)"
  done
done
