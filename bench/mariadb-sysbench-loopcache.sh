#!/usr/bin/env bash
# The store's loop device passing cache flushes on ("write back": each
# flush is an fsync of the whole image file on the host) against dropping
# them ("write through", what dbfork sets on XFS store images), in turns,
# one bench/mariadb-sysbench.sh run each, on the same loop-backed store:
#   sudo bench/mariadb-sysbench-loopcache.sh STORE VERSION BACKEND ROUNDS [PROFILE]
# e.g. sudo QUIET=1 QUIET_MAX=30 TRACE=1 bench/mariadb-sysbench-loopcache.sh /var/lib/dbfork-bench 10.11 reflink 6
# Every line of bench/mariadb-sysbench.sh gets the mode in front. The
# device is left in write-through mode (dbfork's) at the end.
set -euo pipefail
STORE="$1" VERSION="$2" BACKEND="$3" ROUNDS="$4" PROFILE="${5:-new}"
here="$(cd "$(dirname "$0")" && pwd)"
D="${DBFORK:-$here/../bin/dbfork}"
"$D" --store "$STORE" ls >/dev/null # mounts the image if it is not
dev="$(basename "$(findmnt -n -o SOURCE "$STORE")")"
case "$dev" in loop*) ;; *) echo "$STORE is not a loop-backed store" >&2; exit 2 ;; esac
wc="/sys/block/$dev/queue/write_cache"
trap 'echo "write through" > "$wc"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for mode in "write back" "write through"; do
    echo "$mode" > "$wc"
    WORK="${WORK:-/tmp/dbfork-sysbench-$VERSION}/${mode// /-}" "$here/mariadb-sysbench.sh" "$STORE" "$VERSION" "$BACKEND" 1 "$PROFILE" |
      sed "s/^/${mode// /-} round $r: /"
  done
done
