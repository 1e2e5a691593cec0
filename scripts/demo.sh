#!/usr/bin/env bash
# Sets up dbfork on a fresh Debian/Ubuntu machine and shows what it does:
# installs PostgreSQL and filesystem tools if missing, builds dbfork (whose
# new store puts itself on a loop-backed XFS image when the disk cannot
# share extents), builds a golden with a few
# hundred MB of generated data, and compares clone+ready with a plain copy.
#
# Root only sets up: under sudo, the user behind it gets a copy-on-write
# store of their own (`dbfork store init --user`), and the demo itself
# (build, clones, servers) runs as that user. Run from a root shell, it
# runs as root on a store of its own.
source "$(dirname "$0")/lib.sh"
DBFORK="$REPO/bin/dbfork"
if [ "${DBFORK_DEMO_AS_USER:-}" != 1 ]; then
  need_root "the demo's set-up"
  ensure_packages
  ensure_go
  build_dbfork
  if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
    if ! "$DBFORK" store init --user "$SUDO_USER" 2>/tmp/dbfork-demo-init.$$; then
      grep -q "already" /tmp/dbfork-demo-init.$$ || { cat /tmp/dbfork-demo-init.$$ >&2; rm -f /tmp/dbfork-demo-init.$$; exit 1; }
    fi
    rm -f /tmp/dbfork-demo-init.$$
    echo "== from here on, as $SUDO_USER (no root)"
    exec runuser -u "$SUDO_USER" -- env -u DBFORK_STORE DBFORK_DEMO_AS_USER=1 PATH="$PATH" bash "$0" "$@"
  fi
  export DBFORK_STORE="${DBFORK_DEMO_STORE:-/var/lib/dbfork-demo}"
fi

# A root-run demo's new store on a disk that cannot share extents (ext4)
# puts itself on a sparse loop-backed XFS image and says so in one line; a
# user finds the store root set up for them.
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
