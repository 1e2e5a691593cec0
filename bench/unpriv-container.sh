#!/usr/bin/env bash
# dbfork in a simulated unprivileged CI container (GitLab's docker
# executor, a Kubernetes pod, a GitHub `container:` job): uid 65534
# (nobody), every capability dropped (setpriv), and user namespaces
# refused the way Docker's default seccomp profile refuses them
# (bench/nouserns: unshare/clone with CLONE_NEWUSER get EPERM, clone3
# ENOSYS). Loop devices and mounts are out of reach anyway without
# CAP_SYS_ADMIN. Two stores: the container's own disk (ext4 here) and an
# XFS volume (reflink=1) mounted in from outside, as a runner's
# config.toml `volumes` or a pod's hostPath/PVC would.
#
#   sudo bench/unpriv-container.sh check
#     asserts what `auto` picks there: copy on ext4, reflink on the XFS
#     volume; and, as a control, that the same user without the filter
#     gets userns-overlay on ext4 (so the filter is what made the
#     difference). Exits non-zero if any pick differs.
#   sudo bench/unpriv-container.sh bench [PGBENCH_SCALE] [RUNS]
#     builds a pgbench golden (scale 100: ~1.5 GB) in each store and
#     times RUNS x (clone + ready: `dbfork up`; first write: one UPDATE
#     in pgbench_accounts; a second write) and prints medians and ranges.
source "$(dirname "$0")/../scripts/lib.sh"
need_root "the unprivileged-container simulation (it sets up the users' dirs and an XFS volume)"
ensure_go
MODE="${1:-check}"
SCALE="${2:-100}"
RUNS="${3:-3}"
W="$(mktemp -d /tmp/dbuc-XXXXXX)"
chmod 755 "$W"
XFS_MNT="$W/xfs"
cleanup() {
  for s in "$W/ext4/h/.local/share/dbfork" "$XFS_MNT/dbfork"; do
    [ -d "$s" ] && as_container "$W/ext4/h" "$W/dbfork" --store "$s" down --all >/dev/null 2>&1
    [ -d "$s" ] && as_container "$W/ext4/h" "$W/dbfork" --store "$s" gc --all >/dev/null 2>&1
  done
  if mountpoint -q "$XFS_MNT"; then umount "$XFS_MNT" || true; fi
  if grep -q " $W/" /proc/self/mounts; then
    echo "unpriv-container: $W is still mounted; leaving it" >&2
  else
    rm -rf "$W"
  fi
}
trap cleanup EXIT

(cd "$REPO" && go build -o "$W/dbfork" ./cmd/dbfork && go build -o "$W/nouserns" ./bench/nouserns)

# as_container HOME CMD...: CMD as nobody, no capabilities (not even in
# the bounding set), user namespaces refused; HOME its own.
as_container() {
  local h="$1"
  shift
  setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all -- \
    env -i HOME="$h" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 USER=nobody XDG_DATA_HOME="$h/.local/share" \
    "$W/nouserns" "$@"
}
# as_nobody: the same user and capabilities, user namespaces allowed (the
# control: a plain rootless shell).
as_nobody() {
  local h="$1"
  shift
  setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all -- \
    env -i HOME="$h" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 USER=nobody XDG_DATA_HOME="$h/.local/share" "$@"
}

mkdir -p "$W/ext4/h"
chown 65534:65534 "$W/ext4/h"
# The volume: a sparse XFS image (reflink=1), mounted from outside the
# container and handed to the container's user.
truncate -s 8G "$W/xfs.img"
mkfs.xfs -q -m reflink=1 "$W/xfs.img"
mkdir -p "$XFS_MNT"
mount -o loop,nosuid,nodev "$W/xfs.img" "$XFS_MNT"
mkdir "$XFS_MNT/dbfork"
chown 65534:65534 "$XFS_MNT" "$XFS_MNT/dbfork"

EXT4_STORE="$W/ext4/h/.local/share/dbfork"
XFS_STORE="$XFS_MNT/dbfork"
auto_pick() { # runner STORE
  local run="$1" s="$2"
  "$run" "$W/ext4/h" "$W/dbfork" --store "$s" doctor --json 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["auto"]["backend"])'
}

if [ "$MODE" = check ]; then
  fails=0
  expect() { # what got want
    if [ "$2" = "$3" ]; then echo "ok    $1: auto picks $2"; else echo "FAIL  $1: auto picks ${2:-nothing}, want $3" >&2; fails=1; fi
  }
  # The filter itself: a new user namespace must be refused in the container.
  if as_container "$W/ext4/h" unshare --user true 2>/dev/null; then
    echo "FAIL  unshare --user worked inside the simulated container" >&2
    fails=1
  else
    echo "ok    unshare --user refused inside the simulated container"
  fi
  expect "container, store on ext4" "$(auto_pick as_container "$EXT4_STORE")" copy
  expect "container, store on an XFS volume" "$(auto_pick as_container "$XFS_STORE")" reflink
  expect "rootless shell (no filter), store on ext4" "$(auto_pick as_nobody "$EXT4_STORE")" userns-overlay
  exit "$fails"
fi

[ "$MODE" = bench ] || { echo "unpriv-container: mode is check or bench, not $MODE" >&2; exit 2; }
mkdir -p "$W/proj"
cat >"$W/proj/dbfork.toml" <<EOF
engine = "postgres"
database = "bench"
[[load]]
run = "pgbench -i -q -s $SCALE"
EOF
chown -R 65534:65534 "$W/proj"
now() { date +%s%N; }
ms() { echo $((($(now) - $1) / 1000000)); }
median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%d ms (%d-%d)", m, a[1], a[NR]}'; }
for which in ext4 xfs; do
  s="$EXT4_STORE"
  [ "$which" = xfs ] && s="$XFS_STORE"
  t=$(now)
  key="$(cd "$W/proj" && as_container "$W/ext4/h" "$W/dbfork" --store "$s" build)"
  echo "$which: built $key in $(ms "$t") ms, $(du -sh --apparent-size "$s/goldens" | cut -f1) in goldens" >&2
  : >"$W/up.$which"
  : >"$W/w1.$which"
  : >"$W/w2.$which"
  for r in $(seq "$RUNS"); do
    t=$(now)
    (cd "$W/proj" && as_container "$W/ext4/h" "$W/dbfork" --store "$s" up --no-daemon --json) >"$W/up.json"
    ms "$t" >>"$W/up.$which"
    read -r id dsn backend < <(python3 -c 'import json; v=json.load(open("'"$W/up.json"'")); print(v["id"], v["dsn"], v["backend"])')
    t=$(now)
    as_container "$W/ext4/h" psql -XAq "$dsn" -c "update pgbench_accounts set abalance = abalance + 1 where aid = 1"
    ms "$t" >>"$W/w1.$which"
    t=$(now)
    as_container "$W/ext4/h" psql -XAq "$dsn" -c "update pgbench_accounts set abalance = abalance + 1 where aid = 2"
    ms "$t" >>"$W/w2.$which"
    as_container "$W/ext4/h" "$W/dbfork" --store "$s" down "$id" >/dev/null
    echo "$which run $r: backend $backend, up $(tail -1 "$W/up.$which") ms, first write $(tail -1 "$W/w1.$which") ms, second $(tail -1 "$W/w2.$which") ms" >&2
  done
  echo "$which $backend $(median <"$W/up.$which") | $(median <"$W/w1.$which") | $(median <"$W/w2.$which")" >>"$W/table"
done
echo "pgbench scale $SCALE, $RUNS runs each, nobody without capabilities, user namespaces refused:"
echo "store | auto picks | clone + ready (dbfork up) | first write | second write"
sed 's/^\([a-z0-9]*\) \([a-z-]*\) /\1 | \2 | /' "$W/table"
