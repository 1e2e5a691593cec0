#!/usr/bin/env bash
# bench/xfs-cowextsize.sh for MariaDB: for each backend and hint, `dbfork
# up`, N single-row updates of random rows of sbtest1 through one client
# session, FLUSH TABLES … FOR EXPORT (writes the dirty pages out), then
# the store filesystem's used-space growth next to what `dbfork inspect`
# says the clone owns. Run it in a dir holding a MariaDB recipe with
# sysbench-style tables (e.g. STORE/bench/mariadb-1G), on an XFS store.
#   sudo [HINTS="0 16384"] bench/xfs-cowextsize-mariadb.sh STORE N BACKEND...
# HINTS: the copy-on-write extent size hints to compare, in bytes.
set -euo pipefail
STORE="$1"; N="$2"; shift 2
D="${DBFORK:-$(dirname "$0")/../bin/dbfork}"
used() { sync -f "$STORE"; sleep 3; sync -f "$STORE"; df -B1 --output=used "$STORE" | tail -1; }
upd="$(mktemp)"; trap 'rm -f "$upd"' EXIT
for b in "$@"; do
  for hint in ${HINTS:-0 16384}; do
    u0="$(used)"
    out="$(DBFORK_XFS_COWEXTSIZE=$hint "$D" --store "$STORE" up --backend "$b" --no-daemon --json)"
    id="$(sed -n 's/.*"id": "\(.*\)".*/\1/p' <<<"$out" | head -1)"
    eval "$(sed -n 's/.*"\(MYSQL_[A-Z]*\)": "\(.*\)".*/export \1=\2/p' <<<"$out")"
    my() { mariadb --no-defaults -h 127.0.0.1 -P "$MYSQL_PORT" -u "$MYSQL_USER" "$MYSQL_DATABASE" "$@"; }
    rows="$(my -Nse 'select max(id) from sbtest1')"
    python3 -c "import random
for i in range($N): print('UPDATE sbtest1 SET k = k + 1 WHERE id = %d;' % random.randint(1, $rows))" >"$upd"
    my <"$upd"
    my -e 'FLUSH TABLES sbtest1 FOR EXPORT; UNLOCK TABLES'
    u1="$(used)"
    own="$("$D" --store "$STORE" inspect "$id" | sed -n "1s/.*owns \(.*\) of its own.*/\1/p")"
    "$D" --store "$STORE" down "$id" >/dev/null
    echo "$b hint=$hint: $N updates, store grew $(( (u1 - u0) / 1048576 )) MiB ($(( (u1 - u0) / 1024 / N )) KiB/update), clone owns $own"
  done
done
