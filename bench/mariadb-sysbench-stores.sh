#!/usr/bin/env bash
# bench/mariadb-sysbench.sh on several stores in turns (run 1 on each
# store, then run 2 on each, ...), printing each store's mount options
# first: to compare stores whose filesystems were made or mounted
# differently. Each store builds its own golden from the same recipe.
#   sudo bench/mariadb-sysbench-stores.sh VERSION BACKEND RUNS PROFILE STORE...
# A store with other XFS mount options, mounted before its first use
# (dbfork then uses the mount as it finds it):
#   truncate -s 20G /var/lib/dbfork-lb.img && mkfs.xfs -q -m reflink=1 /var/lib/dbfork-lb.img
#   mkdir -p /var/lib/dbfork-lb && mount -o loop,nosuid,nodev,discard,logbsize=256k /var/lib/dbfork-lb.img /var/lib/dbfork-lb
# Mount a fresh image rather than remounting a store: an unmount that had
# to detach lazily leaves the filesystem alive on its loop device, and
# mounting that image again reuses it with its old options.
set -euo pipefail
VERSION="$1" BACKEND="$2" RUNS="$3" PROFILE="$4"; shift 4
for r in $(seq 1 "$RUNS"); do
  for s in "$@"; do
    printf '[%s] ' "$(findmnt -n -o OPTIONS --target "$s")"
    "$(dirname "$0")/mariadb-sysbench.sh" "$s" "$VERSION" "$BACKEND" 1 "$PROFILE" | sed "s/ run 1 / run $r /"
  done
done
