#!/usr/bin/env bash
# Full vs incremental build with the step cache (issue 34): a big seed as
# step 1 and a small migration as step 2; each run changes only the
# migration. "full" builds with --step-cache-min off (every step runs, as
# before the step cache); "incremental" builds with the default threshold
# and starts from the intermediate golden of step 1, made by one priming
# build first. Prints each build's wall time (the whole `dbfork build`
# command) and, per mode, the median and range.
#   sudo bench/stepcache.sh postgres|mariadb RUNS
# postgres: step 1 is `pgbench -i -s $SCALE` (SCALE=100: ~1.5 GB), step 2
# adds a column and an index to pgbench_branches.
# mariadb: step 1 fills $TABLES sysbench-shaped tables of $ROWS rows each
# (id, k, c, pad) from seq_1_to_N (TABLES=3, ROWS=1000000), step 2 adds a
# column to sbtest1.
# STORE (default /var/lib/dbfork-stepcache: on ext4, dbfork makes it an
# XFS image, so intermediate goldens are copied by reflink) is the store;
# goldens the runs leave are expired at the end (gc --keep 1).
set -euo pipefail
ENGINE="$1" RUNS="${2:-3}"
D="${DBFORK:-$(cd "$(dirname "$0")/.." && pwd)/bin/dbfork}"
STORE="${STORE:-/var/lib/dbfork-stepcache}"
WORK="${WORK:-/tmp/dbfork-stepcache-$ENGINE}"
SCALE="${SCALE:-100}" TABLES="${TABLES:-3}" ROWS="${ROWS:-1000000}"
mkdir -p "$WORK"

case "$ENGINE" in
postgres)
  cat > "$WORK/dbfork.toml" <<TOML
engine = "postgres"
database = "bench"
owner = "bench"
[[load]]
name = "seed"
run = "pgbench -i -q -s $SCALE"
[[load]]
name = "migrate"
sql = ["migrate.sql"]
TOML
  migration() { printf 'alter table pgbench_branches add column note%s int default %s;\ncreate index on pgbench_branches(note%s);\n' "$1" "$1" "$1"; } ;;
mariadb)
  {
    printf 'engine = "mariadb"\ndatabase = "sbtest"\nowner = "sbtest"\n[[load]]\nname = "seed"\nsql = ["seed.sql"]\n[[load]]\nname = "migrate"\nsql = ["migrate.sql"]\n'
  } > "$WORK/dbfork.toml"
  : > "$WORK/seed.sql"
  for t in $(seq 1 "$TABLES"); do
    cat >> "$WORK/seed.sql" <<SQL
CREATE TABLE sbtest$t (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL DEFAULT 0, c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', KEY k_$t (k)) ENGINE=InnoDB;
INSERT INTO sbtest$t (id, k, c, pad) SELECT seq, FLOOR(RAND(seq) * $ROWS), SHA2(seq, 256), MD5(seq) FROM seq_1_to_$ROWS;
SQL
  done
  migration() { printf 'ALTER TABLE sbtest1 ADD COLUMN note%s INT DEFAULT %s;\n' "$1" "$1"; } ;;
*) echo "usage: $0 postgres|mariadb RUNS" >&2; exit 2 ;;
esac

n=0
# timed MODE ARGS...: a new migration, one build, its wall time in s.
timed() {
  local mode="$1"; shift
  n=$((n + 1))
  migration "$n$$" > "$WORK/migrate.sql"
  local t0 t1
  t0=$(date +%s%N)
  (cd "$WORK" && "$D" --store "$STORE" build -v "$@" >"$WORK/out" 2>"$WORK/err") || { cat "$WORK/err" >&2; exit 1; }
  t1=$(date +%s%N)
  local s; s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", (b - a) / 1e9}')
  local reused=no
  grep -q "reused steps 1-1" "$WORK/err" && reused=yes
  if [ "$mode" = incremental ] && [ "$reused" != yes ]; then
    echo "incremental build did not reuse step 1:" >&2; grep "dbfork:" "$WORK/err" >&2; exit 1
  fi
  echo "$ENGINE $mode run $n: ${s}s (reused step 1: $reused, load $(cut -d' ' -f1 /proc/loadavg))"
  echo "$s" >> "$WORK/times-$mode"
}

rm -f "$WORK/times-full" "$WORK/times-incremental" "$WORK/times-prime"
timed prime --step-cache-min 0  # keeps the state after the seed, however long it took
for _ in $(seq 1 "$RUNS"); do
  timed full --step-cache-min off
  timed incremental
  "$D" --store "$STORE" gc --keep 1 --min-idle 0 >/dev/null
done
summary() {
  sort -n "$WORK/times-$1" | awk -v e="$ENGINE" -v m="$1" '{v[NR] = $1} END {
    med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%s %s: median %.2fs, range %.2f-%.2fs, %d runs\n", e, m, med, v[1], v[NR], NR }'
}
summary full
summary incremental
