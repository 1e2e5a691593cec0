#!/usr/bin/env bash
# What the XFS copy-on-write extent size hint costs a PostgreSQL clone on
# disk. For each backend and hint: `dbfork up`, pgbench random single-row
# updates of pgbench_accounts for SECONDS with 2 clients, CHECKPOINT, then
# the store filesystem's used-space growth (statfs: it counts the
# copy-on-write reservations that FIEMAP does not show) next to what
# `dbfork inspect` says the clone owns. Run it in a dir holding a recipe
# whose database has pgbench_accounts (e.g. STORE/bench/postgres-1G), on
# an XFS store, with nothing else writing to it.
#   sudo bench/xfs-cowextsize.sh STORE SECONDS BACKEND...
# The hint is set through DBFORK_XFS_COWEXTSIZE (0 = XFS default, 128 KiB).
set -euo pipefail
STORE="$1"; T="$2"; shift 2
D="${DBFORK:-$(dirname "$0")/../bin/dbfork}"
used() { sync -f "$STORE"; sleep 3; sync -f "$STORE"; df -B1 --output=used "$STORE" | tail -1; }
upd="$(mktemp)"; trap 'rm -f "$upd"' EXIT
for b in "$@"; do
  for hint in 0 8192; do
    u0="$(used)"
    out="$(DBFORK_XFS_COWEXTSIZE=$hint "$D" --store "$STORE" up --backend "$b" --no-daemon --json)"
    id="$(sed -n 's/.*"id": "\(.*\)".*/\1/p' <<<"$out" | head -1)"
    dsn="$(sed -n 's/.*"dsn": "\(.*\)".*/\1/p' <<<"$out" | head -1)"
    rows="$(psql "$dsn" -Atc 'select max(aid) from pgbench_accounts')"
    printf '\\set aid random(1, %s)\nUPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;\n' "$rows" >"$upd"
    tx="$(pgbench -n -T "$T" -c 2 -f "$upd" "$dsn" 2>&1 | sed -n 's/.*actually processed: \([0-9]*\).*/\1/p')"
    psql "$dsn" -qc checkpoint
    u1="$(used)"
    own="$("$D" --store "$STORE" inspect "$id" | sed -n "1s/.*owns \(.*\) of its own.*/\1/p")"
    "$D" --store "$STORE" down "$id" >/dev/null
    grow=$(( (u1 - u0) / 1048576 ))
    echo "$b hint=$hint: $tx updates, store grew $grow MiB ($(( (u1 - u0) / 1024 / tx )) KiB/update), clone owns $own"
  done
done
