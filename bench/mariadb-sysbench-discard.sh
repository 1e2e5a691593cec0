#!/usr/bin/env bash
# The same sysbench runs as bench/mariadb-sysbench.sh on one loop-image
# store, mounted in turns with and without XFS online discard (dbfork
# mounts its images with `discard`): does discarding a removed clone's
# blocks stall the next run? (It did not make a difference:
# docs/mariadb.md.)
#   sudo bench/mariadb-sysbench-discard.sh STORE VERSION SERIES RUNS [PROFILE...]
# Each series: unmount STORE, mount its image with one option set, RUNS
# runs per PROFILE (default: new), then the other option set. STORE must
# be a loop-image store (STORE.img next to it).
set -euo pipefail
STORE="$1" VERSION="$2" SERIES="$3" RUNS="$4"; shift 4
[ $# -gt 0 ] || set -- new
HERE="$(cd "$(dirname "$0")" && pwd)"
D="${DBFORK:-$HERE/../bin/dbfork}"
IMG="$STORE.img"
[ -f "$IMG" ] || { echo "$IMG: not a loop-image store" >&2; exit 2; }
for s in $(seq 1 "$SERIES"); do
  for opts in loop,nosuid,nodev,discard loop,nosuid,nodev; do
    "$D" --store "$STORE" store umount >/dev/null
    mount -o "$opts" "$IMG" "$STORE"
    echo "# series $s: mounted $opts"
    DBFORK="$D" "$HERE/mariadb-sysbench.sh" "$STORE" "$VERSION" reflink "$RUNS" "$@"
  done
done
"$D" --store "$STORE" store umount >/dev/null
