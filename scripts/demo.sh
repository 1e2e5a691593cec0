#!/usr/bin/env bash
# Sets up dbfork on a fresh Debian/Ubuntu machine and shows what it does:
# installs PostgreSQL and filesystem tools if missing, builds dbfork (whose
# new store puts itself on a loop-backed XFS image when the disk cannot
# share extents), builds a golden with a few
# hundred MB of generated data, and compares clone+ready with a plain copy.
source "$(dirname "$0")/lib.sh"
need_root "the demo"
ensure_packages
ensure_go
build_dbfork
DBFORK="$REPO/bin/dbfork"
STORE="${DBFORK_DEMO_STORE:-/var/lib/dbfork-demo}"
export DBFORK_STORE="$STORE"

# No set-up step: a new store on a disk that cannot share extents (ext4)
# puts itself on a sparse loop-backed XFS image and says so in one line.
"$DBFORK" doctor | sed -n '/^backends/,/auto picks/p'

cd "$REPO/examples/demo"
echo "== building the golden (once; later runs reuse it)"
time "$DBFORK" build

json() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$1)"; }
measure() { # backend -> "ready_ms id dsn"
  "$DBFORK" up --backend "$1" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["ready_ms"], d["id"], d["dsn"])'
}
echo "== clone + start + first query, auto backend"
read -r clone_ms id dsn < <(measure auto)
backend="$("$DBFORK" ls --json | python3 -c "import json,sys; print([i['backend'] for i in json.load(sys.stdin)['instances'] if i['id']=='$id'][0])")"
psql "$dsn" -XAtc "SELECT 'accounts in the clone: ' || count(*) FROM accounts"
psql "$dsn" -XAtc "UPDATE accounts SET balance = balance + 1 WHERE id = 42" >/dev/null
"$DBFORK" down "$id" >/dev/null
echo "== the same with a plain copy of the data dir"
read -r copy_ms id dsn < <(measure copy)
"$DBFORK" down "$id" >/dev/null
size="$("$DBFORK" ls --json | python3 -c 'import json,sys; print([round(g["total_bytes"]/2**20) for g in json.load(sys.stdin)["goldens"] if g["recipe"].endswith("examples/demo/dbfork.toml")][0])')"
printf '\n%-34s %8s ms\n%-34s %8s ms\n' "clone+ready ($backend, ${size} MiB):" "$clone_ms" "plain copy+ready:" "$copy_ms"
