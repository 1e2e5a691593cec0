#!/usr/bin/env bash
# Clone+ready and reset of goldens with and without [fresh] slots, per
# backend: `dbfork up --json` then one write and `dbfork reset --json`,
# in turns between the recipe dirs so that load hits them alike.
#
#   sudo STORE=/var/lib/dbfork-x bench/slots-up.sh RUNS BACKENDS DIR...
#   e.g. bench/slots-up.sh 7 "overlay reflink" work/pg18 work/pg18s
#
# Prints, per recipe dir and backend, the median (min-max) of ready_ms
# and of the reset's reset_ms.
set -euo pipefail
runs=${1:?runs}; backends=${2:?backends}; shift 2
dbfork=${DBFORK:-$(cd "$(dirname "$0")/.." && pwd)/bin/dbfork}
store=${STORE:?set STORE to the store}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for ((i = 0; i < runs; i++)); do
  for b in $backends; do
    for d in "$@"; do
      key=$(basename "$d")-$b
      (cd "$d" && "$dbfork" --store "$store" up --backend "$b" --json) > "$tmp/up.json"
      id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$tmp/up.json")
      python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ready_ms"])' "$tmp/up.json" >> "$tmp/$key.ready"
      "$dbfork" --store "$store" run "$id" -- true 2>/dev/null || true
      dsn=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dsn"])' "$tmp/up.json")
      python3 - "$dsn" <<'PY' || true
import subprocess, sys
subprocess.run(["psql", sys.argv[1], "-qc", "insert into pgbench_history(tid) values (1)"], check=True)
PY
      "$dbfork" --store "$store" reset --json "$id" > "$tmp/reset.json"
      python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["reset_ms"])' "$tmp/reset.json" >> "$tmp/$key.reset"
      "$dbfork" --store "$store" down "$id" > /dev/null
    done
  done
done
printf '%-22s %-26s %-26s\n' "recipe-backend" "clone+ready ms" "reset ms"
for f in "$tmp"/*.ready; do
  k=$(basename "$f" .ready)
  python3 - "$k" "$f" "$tmp/$k.reset" <<'PY'
import statistics, sys
def s(p):
    xs = sorted(float(x) for x in open(p))
    return "%.1f (%.1f-%.1f)" % (statistics.median(xs), xs[0], xs[-1])
print("%-22s %-26s %-26s" % (sys.argv[1], s(sys.argv[2]), s(sys.argv[3])))
PY
done
