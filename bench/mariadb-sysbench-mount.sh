#!/usr/bin/env bash
# bench/mariadb-sysbench.sh with the loop store mounted with other options:
# for each run, each OPTS in turn remounts STORE's image with dbfork's own
# options (loop,nosuid,nodev,discard) plus OPTS ("" adds nothing), then runs
# one sysbench run of PROFILE. A remount empties the store's page cache, so
# every variant starts equally cold. Ends with the store mounted as dbfork
# mounts it.
#   sudo bench/mariadb-sysbench-mount.sh STORE VERSION BACKEND RUNS PROFILE OPTS...
# Example: ... /var/lib/dbfork-cowbench 10.11 reflink 3 new "" logbsize=256k
set -euo pipefail
STORE="$1" VERSION="$2" BACKEND="$3" RUNS="$4" PROFILE="$5"; shift 5
D="${DBFORK:-$(cd "$(dirname "$0")/.." && pwd)/bin/dbfork}"
remount() {
  local base="loop,nosuid,nodev,discard" o="$1"
  # "nodiscard" after "discard" does not switch it off: leave discard out
  case ",$o," in *,nodiscard,*) base="loop,nosuid,nodev" o="$(sed 's/\(^\|,\)nodiscard//; s/^,//' <<<"$o")" ;; esac
  "$D" --store "$STORE" store umount
  mount -o "$base${o:+,$o}" "$STORE.img" "$STORE"
}
trap 'remount ""' EXIT
for r in $(seq 1 "$RUNS"); do
  for o in "$@"; do
    remount "$o"
    printf '[%s] ' "$(findmnt -n -o OPTIONS "$STORE")"
    "$(dirname "$0")/mariadb-sysbench.sh" "$STORE" "$VERSION" "$BACKEND" 1 "$PROFILE"
  done
done
