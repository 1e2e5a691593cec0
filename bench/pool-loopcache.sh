#!/usr/bin/env bash
# `dbfork bench pool` scenarios with the store's loop device passing cache
# flushes on ("write back") and dropping them ("write through", dbfork's
# setting for XFS store images), in turns:
#   sudo bench/pool-loopcache.sh STORE CLIENTS CYCLES "MODE RECIPE BACKEND"...
# e.g. sudo bench/pool-loopcache.sh /var/lib/dbfork-bench 1,4,8 50 \
#   "release /var/lib/dbfork-bench/bench/postgres-1G/dbfork.toml auto"
# The device is left in write-through mode at the end.
set -euo pipefail
STORE="$1" CLIENTS="$2" CYCLES="$3"; shift 3
D="${DBFORK:-$(cd "$(dirname "$0")/.." && pwd)/bin/dbfork}"
"$D" --store "$STORE" ls >/dev/null # mounts the image if it is not
dev="$(basename "$(findmnt -n -o SOURCE "$STORE")")"
case "$dev" in loop*) ;; *) echo "$STORE is not a loop-backed store" >&2; exit 2 ;; esac
wc="/sys/block/$dev/queue/write_cache"
trap 'echo "write through" > "$wc"' EXIT
for sc in "$@"; do
  read -r mode recipe backend <<<"$sc"
  for cache in "write back" "write through"; do
    echo "$cache" > "$wc"
    echo "=== $mode $backend $(basename "$(dirname "$recipe")"), loop $cache, load $(cut -d' ' -f1-3 /proc/loadavg)"
    "$D" --store "$STORE" bench pool -f "$recipe" --mode "$mode" --backend "$backend" --clients "$CLIENTS" --cycles "$CYCLES"
  done
done
