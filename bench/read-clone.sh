#!/usr/bin/env bash
# How long reading a whole fresh clone takes: `up --no-warm`, then `cat`
# of every file of its data dir, then `down`, RUNS times. Run it with the
# store's loop device in each mode to compare (losetup --direct-io=on|off).
#   sudo bench/read-clone.sh STORE RECIPE [RUNS] [BACKEND]
set -euo pipefail
STORE="$1" RECIPE="$2" RUNS="${3:-3}" BACKEND="${4:-reflink}"
D="${DBFORK:-$(cd "$(dirname "$0")/.." && pwd)/bin/dbfork}"
for _ in $(seq 1 "$RUNS"); do
  out="$("$D" --store "$STORE" up --no-daemon --no-warm --backend "$BACKEND" -f "$RECIPE" --json)"
  id="$(sed -n 's/.*"id": "\(.*\)".*/\1/p' <<<"$out" | head -1)"
  t0=$(date +%s%N)
  find "$STORE/instances/$id/data" -type f -exec cat {} + >/dev/null
  t1=$(date +%s%N)
  dev="$(basename "$(findmnt -n -o SOURCE "$STORE")")"
  echo "read $(((t1 - t0) / 1000000)) ms  $(du -s --apparent-size -h "$STORE/instances/$id/data" | cut -f1)  direct-io $(cat "/sys/block/$dev/loop/dio" 2>/dev/null || echo -)"
  "$D" --store "$STORE" down "$id" >/dev/null
done
