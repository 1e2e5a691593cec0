#!/usr/bin/env bash
# Build once, pull everywhere: what a CI runner born empty pays with a
# registry (issue 15). On this machine's loopback, with a CNCF distribution
# registry (filesystem storage, bench/ociregistry) and stores on XFS images
# (what `dbfork` makes by itself as root):
#   build time in store A          vs  push time (all blobs new)
#   pull into an empty store B     +   first clone+ready (`dbfork up`)
#   compressed size of the artifact
#   after a one-table change: bytes re-sent by the second push, vs the size
#   of that table and the bytes of files that differ between the goldens.
# Needs root, PostgreSQL (pgbench) or MariaDB (sysbench), Go. Prints one
# table.
#   sudo bench/oci.sh [PGBENCH_SCALE] [PULL_RUNS]
#   sudo ENGINE=mariadb bench/oci.sh [SYSBENCH_ROWS_PER_TABLE] [PULL_RUNS]   (7 sysbench tables)
#   sudo ENGINE=mariadb DATASET=sql bench/oci.sh [ROWS_PER_TABLE] [PULL_RUNS]
#   sudo DATASET=sql bench/oci.sh [ROWS_PER_TABLE] [PULL_RUNS]   (the same
#     tables for PostgreSQL, created first and loaded afterwards, so every
#     page is WAL-logged)
#     (7 sysbench-shaped tables from SQL with values derived from the row
#     number, so a rebuild loads the same rows: what a one-table change
#     re-sends is then down to InnoDB, not to sysbench's random strings)
set -euo pipefail
SCALE="${1:-100}"
RUNS="${2:-3}"
cd "$(dirname "$0")/.."
W="$(mktemp -d /tmp/dbfork-oci-bench-XXXX)"
chmod 755 "$W"
REGPID=""
cleanup() {
  [ -n "$REGPID" ] && kill "$REGPID" 2>/dev/null || true
  for s in "$W"/store-*; do
    [ -d "$s" ] || continue
    "$W/dbfork" --store "$s" down --all >/dev/null 2>&1 || true
    "$W/dbfork" --store "$s" gc --all >/dev/null 2>&1 || true
    "$W/dbfork" --store "$s" store umount >/dev/null 2>&1 || true
  done
  rm -rf "$W"
}
trap cleanup EXIT
go build -o "$W/dbfork" ./cmd/dbfork
go build -o "$W/ociregistry" ./bench/ociregistry
D="$W/dbfork"
now() { date +%s%N; }
ms() { echo $(( ($(now) - $1) / 1000000 )); }

"$W/ociregistry" -root "$W/registry" >"$W/registry.addr" 2>"$W/registry.log" &
REGPID=$!
until [ -s "$W/registry.addr" ]; do sleep 0.05; done
ENGINE="${ENGINE:-postgres}"
REPO="$(cat "$W/registry.addr")/bench/$ENGINE"

mkdir -p "$W/proj"
if [ "$ENGINE" = mariadb ] && [ "${DATASET:-}" = sql ]; then
  cat >"$W/proj/dbfork.toml" <<EOF
engine = "mariadb"
database = "bench"
owner = "bench"
[[load]]
sql = "tables.sql"
[[load]]
sql = "lookup.sql"
EOF
  for t in 1 2 3 4 5 6 7; do
    printf 'create table sbtest%s(id int primary key, k int not null, c char(120) not null, pad char(60) not null, key k_%s(k));\n' "$t" "$t"
    printf "insert into sbtest%s select seq, seq * 7919 %% %s, concat_ws('-', md5(seq), md5(seq + 1), md5(seq + 2)), concat_ws('-', md5(seq * 3), left(sha1(seq), 20)) from seq_1_to_%s;\n" "$t" "$SCALE" "$SCALE"
  done >"$W/proj/tables.sql"
elif [ "$ENGINE" = mariadb ]; then
  cat >"$W/proj/dbfork.toml" <<EOF
engine = "mariadb"
database = "bench"
owner = "bench"
[[load]]
run = "sysbench oltp_write_only --db-driver=mysql --mysql-host=\$MYSQL_HOST --mysql-port=\$MYSQL_PORT --mysql-user=\$MYSQL_USER --mysql-password=\$MYSQL_PWD --mysql-db=\$MYSQL_DATABASE --tables=7 --table-size=$SCALE prepare >/dev/null"
[[load]]
sql = "lookup.sql"
EOF
fi
if [ "$ENGINE" = mariadb ]; then
  lookup() { # rows
    printf 'create table lookup(id int primary key, name text not null);\ninsert into lookup select seq, md5(seq) from seq_1_to_%s;\n' "$1" >"$W/proj/lookup.sql"
  }
  # One clone: analyze first, or InnoDB's estimate may still be empty.
  table_bytes() { $D --store "$W/store-a" run -- mariadb -N -e "analyze table lookup; select data_length + index_length from information_schema.tables where table_name = 'lookup'" | tail -1; }
  WHAT="MariaDB, sysbench 7 x $SCALE rows"
  [ "${DATASET:-}" = sql ] && WHAT="MariaDB, 7 x $SCALE deterministic rows from SQL"
else
  cat >"$W/proj/dbfork.toml" <<EOF
engine = "postgres"
database = "bench"
owner = "bench"
[[load]]
run = "pgbench -i -q -s $SCALE"
[[load]]
sql = "lookup.sql"
EOF
  WHAT="pgbench scale $SCALE"
  if [ "${DATASET:-}" = sql ]; then
    # Tables created first, loaded afterwards: every page is WAL-logged.
    cat >"$W/proj/dbfork.toml" <<EOF
engine = "postgres"
database = "bench"
owner = "bench"
[[load]]
sql = ["schema.sql", "tables.sql"]
[[load]]
sql = "lookup.sql"
EOF
    for t in 1 2 3 4 5 6 7; do
      printf 'create table sbtest%s(id int primary key, k int not null, c char(120) not null, pad char(60) not null);\ncreate index k_%s on sbtest%s(k);\n' "$t" "$t" "$t"
    done >"$W/proj/schema.sql"
    for t in 1 2 3 4 5 6 7; do
      printf "insert into sbtest%s select g, g * 7919 %% %s, concat_ws('-', md5(g::text), md5((g + 1)::text), md5((g + 2)::text)), concat_ws('-', md5((g * 3)::text), left(md5(g::text), 20)) from generate_series(1, %s) g;\n" "$t" "$SCALE" "$SCALE"
    done >"$W/proj/tables.sql"
    WHAT="PostgreSQL, 7 x $SCALE deterministic rows from SQL, tables created before they are loaded"
  fi
  lookup() { # rows
    printf 'create table lookup(id int primary key, name text not null);\ninsert into lookup select g, md5(g::text) from generate_series(1, %s) g;\n' "$1" >"$W/proj/lookup.sql"
  }
  table_bytes() { $D --store "$W/store-a" run -- psql -XAtc "select pg_total_relation_size('lookup')"; }
fi
lookup 100000
cd "$W/proj"

t=$(now); KEY="$($D --store "$W/store-a" build 2>/dev/null)"; BUILD_MS=$(ms "$t")
t=$(now); $D --store "$W/store-a" push "$REPO" --json >"$W/push1.json"; PUSH_MS=$(ms "$t")
j() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }
COMPRESSED=$(j "$W/push1.json" "d['stats']['compressed']")
DATA=$(j "$W/push1.json" "d['stats']['uncompressed']")
LAYERS=$(j "$W/push1.json" "d['stats']['layers']")

PULLS=(); UPS=()
for i in $(seq 1 "$RUNS"); do
  s="$W/store-b$i"
  $D --store "$s" ls >/dev/null 2>&1 # the store (an XFS image) exists before the clock starts
  sync; echo 3 >/proc/sys/vm/drop_caches
  t=$(now); $D --store "$s" pull "$REPO:$KEY" >/dev/null; PULLS+=("$(ms "$t")")
  t=$(now); $D --store "$s" up --json >/dev/null; UPS+=("$(ms "$t")")
  $D --store "$s" down --all >/dev/null
  $D --store "$s" gc --all >/dev/null 2>&1 || true
  $D --store "$s" store umount >/dev/null 2>&1 || true
  rm -rf "$s" "$s.img"
done

# One table changes: one more row in lookup.
lookup 100001
t=$(now); KEY2="$($D --store "$W/store-a" build 2>/dev/null)"; BUILD2_MS=$(ms "$t")
$D --store "$W/store-a" push "$REPO" --json >"$W/push2.json"
RESENT=$(j "$W/push2.json" "d['stats']['bytes_sent']")
RESENT_LAYERS="$(j "$W/push2.json" "d['stats']['layers_sent']")/$(j "$W/push2.json" "d['stats']['layers']")"
TABLE=$(table_bytes)
DIFF=$(python3 - "$W/store-a/goldens/$KEY/manifest.json" "$W/store-a/goldens/$KEY2/manifest.json" "$W/diff.txt" <<'EOF'
import json, sys
a = {f["path"]: f.get("sha256") for f in json.load(open(sys.argv[1]))["files"]}
b = json.load(open(sys.argv[2]))["files"]
diff = sorted((f for f in b if a.get(f["path"]) != f.get("sha256")), key=lambda f: -f["size"])
print(sum(f["size"] for f in diff))
with open(sys.argv[3], "w") as out:
    for f in diff[:12]:
        print(f"  {f['size'] / 1048576:9.1f} MiB  {f['path']}", file=out)
    if len(diff) > 12:
        print(f"  ... and {len(diff) - 12} more files, {sum(f['size'] for f in diff[12:]) / 1048576:.1f} MiB", file=out)
EOF
)
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
range() { printf '%s\n' "$@" | sort -n | awk 'NR==1{lo=$1} {hi=$1} END {print lo "–" hi}'; }
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b/1048576}'; }
PULL_MED=$(median "${PULLS[@]}"); UP_MED=$(median "${UPS[@]}")
cat <<EOF
$WHAT + a 100k-row lookup table; golden $(mib "$DATA"), $LAYERS layers, artifact $(mib "$COMPRESSED") (zstd)
| step | ms |
|---|---|
| build (store A) | $BUILD_MS |
| push, all blobs new | $PUSH_MS |
| pull into an empty store (median of $RUNS, range) | $PULL_MED ($(range "${PULLS[@]}")) |
| first clone + ready, \`dbfork up\` (median, range) | $UP_MED ($(range "${UPS[@]}")) |
| pull + first clone vs build | $(awk -v p="$PULL_MED" -v u="$UP_MED" -v b="$BUILD_MS" 'BEGIN {printf "%.2f", (p+u)/b}') |
| rebuild after one more lookup row | $BUILD2_MS |
one-table change: re-sent $(mib "$RESENT") in $RESENT_LAYERS layers; lookup is $(mib "$TABLE"); files that differ between the goldens: $(mib "$DIFF")
$(cat "$W/diff.txt")
EOF
