#!/usr/bin/env bash
# First-write figures for MariaDB clones through dbfork itself: for each
# backend, `dbfork up`, then 10 single-row inserts into the largest table,
# one client command each, then `dbfork down`. Run it in a dir holding a
# MariaDB recipe whose database has a table sbtest1.
#   sudo bench/mariadb-firstwrite.sh STORE BACKEND...
set -euo pipefail
STORE="$1"; shift
D="${DBFORK:-$(dirname "$0")/../bin/dbfork}"
for b in "$@"; do
  for rep in 1 2; do
    out="$("$D" --store "$STORE" up --backend "$b" --json)"
    id="$(sed -n 's/.*"id": "\(.*\)".*/\1/p' <<<"$out" | head -1)"
    ready="$(sed -n 's/.*"ready_ms": \([0-9.]*\).*/\1/p' <<<"$out")"
    eval "$(sed -n 's/.*"\(MYSQL_[A-Z]*\)": "\(.*\)".*/export \1=\2/p' <<<"$out")"
    lat=""
    for i in $(seq 1 10); do
      t0=$(date +%s%N)
      mariadb --no-defaults -h "$MYSQL_HOST" -P "$MYSQL_PORT" -u "$MYSQL_USER" "$MYSQL_DATABASE" -e "INSERT INTO sbtest1 (k, c, pad) VALUES ($i, 'x', 'y')"
      lat="$lat $(( ($(date +%s%N) - t0) / 1000000 ))"
    done
    "$D" --store "$STORE" down "$id" >/dev/null
    printf '%-8s ready %6.0f ms  insert ms:%s\n' "$b" "$ready" "$lat"
  done
done
