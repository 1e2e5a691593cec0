#!/usr/bin/env bash
# What a cold daemon costs a `pytest -n 4` run: the same suite with no
# daemon running (the plugin starts one) and with a warm one. Needs root,
# PostgreSQL, python3 with pytest, pytest-xdist and psycopg, and a built
# bin/dbfork. Usage: sudo bench/pytest-cold.sh [RUNS] [ROWS]
set -euo pipefail
runs=${1:-3}
rows=${2:-100000}
repo="$(cd "$(dirname "$0")/.." && pwd)"
bin="$repo/bin/dbfork"
work="$(mktemp -d /tmp/dbfork-pytest-cold-XXXXXX)"
chmod 755 "$work"
store="$work/store"
export DBFORK_BIN="$bin" DBFORK_STORE="$store" DBFORK_STORE_FS="${DBFORK_STORE_FS:-auto}"
unset DBFORK_SOCKET
cleanup() {
  "$bin" --store "$store" daemon stop >/dev/null 2>&1 || true
  "$bin" --store "$store" gc --all >/dev/null 2>&1 || true
  if mountpoint -q "$store"; then umount "$store"; fi
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/proj" "$work/suite"
cat > "$work/proj/dbfork.toml" <<TOML
engine = "postgres"
[[load]]
sql = ["seed.sql"]
[pool]
min = 4
max = 8
TOML
echo "create table items(id bigint primary key, v text); insert into items select g, md5(g::text) from generate_series(1, $rows) g;" > "$work/proj/seed.sql"
cat > "$work/suite/test_t.py" <<'PY'
import psycopg, pytest
import os
@pytest.mark.parametrize("n", range(16))
def test_db(dbfork_session, n):
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as c:
        c.execute("insert into items values (-1 - %s, 'x')", (n,))
        assert c.execute("select count(*) from items where id = -1 - %s", (n,)).fetchone()[0] == 1
PY
printf '[pytest]\ndbfork_recipe = ../proj/dbfork.toml\n' > "$work/suite/pytest.ini"
"$bin" --store "$store" build -f "$work/proj/dbfork.toml" >/dev/null
py=("${PYTHON:-/usr/bin/python3}" -m pytest -q -p no:cacheprovider -n 4)
[ -n "${PYTHONPATH:-}" ] || export PYTHONPATH="$repo/clients/python"
ms() { local t0 t1; t0=$(date +%s%N); (cd "$work/suite" && "${py[@]}" >/dev/null); t1=$(date +%s%N); echo $(( (t1 - t0) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%d (%d-%d)", m, a[1], a[NR]}'; }
cold=() warm=()
for i in $(seq "$runs"); do
  "$bin" --store "$store" daemon stop >/dev/null 2>&1 || true
  cold+=("$(DBFORK_DAEMON_IDLE=1s ms)")
  "$bin" --store "$store" daemon stop >/dev/null 2>&1 || true
  "$bin" --store "$store" daemon start --idle 10m >/dev/null
  ms >/dev/null # warms the recipe's pool
  sleep 2
  warm+=("$(ms)")
done
echo "pytest -n 4, 16 tests on one session database per worker, golden of $rows rows built beforehand, $runs runs, ms median (min-max):"
echo "  cold (no daemon; the plugin starts one): $(printf '%s\n' "${cold[@]}" | median)"
echo "  warm (daemon up, pool warm):              $(printf '%s\n' "${warm[@]}" | median)"
# The parts of the cold start, through the plugin's own client: daemon
# start, golden check, and four workers' first leases at once.
"$bin" --store "$store" daemon stop >/dev/null 2>&1 || true
parts() {
  "${PYTHON:-/usr/bin/python3}" - "$work/proj/dbfork.toml" <<'PY'
import sys, time, threading
from pytest_dbfork import Client, find_socket
t = time.monotonic(); sock = find_socket(); t_start = time.monotonic() - t
c = Client(socket_path=sock)
t = time.monotonic(); c.ensure_golden(sys.argv[1]); t_golden = time.monotonic() - t
res = []
def one():
    t = time.monotonic(); l = Client(socket_path=sock).acquire(sys.argv[1], ttl_seconds=60); res.append((time.monotonic() - t, l.id))
ths = [threading.Thread(target=one) for _ in range(4)]
t = time.monotonic(); [x.start() for x in ths]; [x.join() for x in ths]; t_leases = time.monotonic() - t
for _, i in res: c.release(i)
print("%d %d %d" % (t_start * 1000, t_golden * 1000, t_leases * 1000))
PY
}
echo "  parts, cold: daemon start / golden check / 4 first leases at once (ms): $(parts)"
sleep 3
echo "  parts, warm: daemon start / golden check / 4 first leases at once (ms): $(parts)"
