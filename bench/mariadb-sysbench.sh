#!/usr/bin/env bash
# sysbench oltp_write_only on fresh MariaDB clones through dbfork itself:
# seed 000's workload (TABLES x ROWS rows, 1 thread, SECONDS s). The golden
# is built once per version by `sysbench prepare`; each profile is the
# recipe's [settings] (instances only, not part of the key), each run a
# fresh `dbfork up`, the sysbench run, `dbfork down`. Prints one line per
# run: backend, profile, clone+ready ms, tps, p95 and max latency, and the
# machine's load average (figures from a busy machine are not comparable;
# QUIET=1 waits before each run until the CPUs are nearly idle).
#   sudo bench/mariadb-sysbench.sh STORE VERSION BACKEND RUNS PROFILE...
# PROFILE is a name from the table below. Example:
#   sudo bench/mariadb-sysbench.sh /var/lib/dbfork-bench 10.11 reflink 3 old new
# TRACE=1 also writes, per run, sysbench's per-second figures
# (--report-interval=1 --percentile=100: tps and that second's maximum)
# beside the server's checkpoint age, dirty pages and pages flushed each
# second to $WORK/trace-VERSION-PROFILE-RUN.txt (the p95 column then reads 0:
# sysbench reports the 100th percentile instead).
# PROFILE@SIZE (e.g. new@4m; SIZE in bytes or with k/m) runs PROFILE on a
# clone whose XFS copy-on-write extent size hint is SIZE instead of
# dbfork's one InnoDB page (16 KiB; `up` with DBFORK_XFS_COWEXTSIZE); @0 is
# XFS's default (32 blocks, 128 KiB). The "disk" column is how much the
# store's used space grew from before `up` to the end of the run: the
# clone's private blocks, including XFS's copy-on-write reservations;
# "xfs trans" and "extents" count the XFS transactions and extent
# allocations from `up` to the end of the run (after a sync).
# PROFILE/BACKEND (e.g. new/copy) runs that variant on another backend, so
# backends can take turns too. PROFILE+warm (e.g. new+warm, new@1m+warm/copy)
# reads every file of the clone once after `up` and before the run, as a
# pool's prewarm does ("warm" column: how long that took): a fresh reflink
# clone's files are new inodes whose pages are not cached yet, a plain
# copy's were just written. Plain PROFILE is the clone as `up` gives it:
# on reflink and btrfs, `up` starts reading the clone in the background
# once it is ready; PROFILE+cold turns that off (`up --no-warm`).
# DROP_CACHES=1 drops every cached file page before each run.
# SLOW_CALLS=MS records, per run, every system call of the server that
# took MS ms or more (perf trace: which thread, which call, how long) to
# $WORK/calls-VERSION-PROFILE-RUN.txt, to see what a slow second waited on.
# DSTATE=MS samples every MS ms the server's threads blocked in the kernel
# with their kernel stacks (bench/dstate-sample.py) to
# $WORK/dstate-VERSION-PROFILE-RUN.txt.
set -euo pipefail
STORE="$1" VERSION="$2" BACKEND="$3" RUNS="$4"; shift 4
D="${DBFORK:-$(cd "$(dirname "$0")/.." && pwd)/bin/dbfork}"
TABLES="${TABLES:-7}" ROWS="${ROWS:-1000000}" SECONDS_="${SECONDS_:-20}"
WORK="${WORK:-/tmp/dbfork-sysbench-$VERSION}"

settings() {
  case "$1" in
    old) # the test profile before issue 16: 16 MiB redo log, 64 MiB buffer pool
      printf 'innodb_log_file_size = "16M"\ninnodb_buffer_pool_size = "64M"\ninnodb_io_capacity = "200"\ninnodb_flush_method = "O_DIRECT"\n' ;;
    new) ;; # the test profile dbfork passes today
    log16) echo 'innodb_log_file_size = "16M"' ;;   # today's profile with the 16 MiB redo log of before the seal
    sealed) # the sealed 256 MiB log with the flushing settings before: page cleaner asleep until the log is 7/8 full, O_DIRECT, neighbours
      printf 'innodb_max_dirty_pages_pct_lwm = "0"\ninnodb_flush_neighbors = "1"\ninnodb_io_capacity = "5000"\n'; page_writes O_DIRECT ;;
    nobuf) page_writes O_DIRECT ;;                   # today's profile with O_DIRECT page writes
    nosync) echo 'innodb_flush_method = "nosync"' ;;  # today's profile, data files never fsynced (10.x spelling)
    lwm80) echo 'innodb_max_dirty_pages_pct_lwm = "80"' ;;  # awake, but flushing driven by the redo log only
    io5k) echo 'innodb_io_capacity = "5000"' ;;      # today's profile flushing at up to 5000 pages/s
    log1g) echo 'innodb_log_file_size = "1G"' ;;     # a larger log, created (preallocated) by each clone
    *) echo "unknown profile $1" >&2; exit 2 ;;
  esac
}

# page_writes O_DIRECT|fsync: how data pages are written, in the spelling
# of the server version (innodb_flush_method is deprecated from 11.0.1).
page_writes() {
  case "$VERSION" in
    10.*) echo "innodb_flush_method = \"$1\"" ;;
    *) [ "$1" = fsync ] && echo 'innodb_data_file_buffering = "ON"' || echo 'innodb_data_file_buffering = "OFF"' ;;
  esac
}

mkdir -p "$WORK"
recipe() {
  cat > "$WORK/dbfork.toml" <<EOF
engine = "mariadb"
version = "$VERSION"
database = "sbtest"
owner = "sbtest"
[[load]]
run = "env -u MYSQL_PWD sysbench oltp_write_only --db-driver=mysql --mysql-socket=\$MYSQL_UNIX_PORT --mysql-user=\$MYSQL_USER --mysql-db=\$MYSQL_DATABASE --tables=$TABLES --table-size=$ROWS prepare >/dev/null"
[settings]
$(settings "$1")
EOF
}

# trace_status prints, every second, InnoDB's checkpoint age (MB), its
# limit, dirty pages and the pages flushed since the previous second, then
# free pages in the buffer pool and two counters so far: waits for a free
# page (Innodb_buffer_pool_wait_free) and waits for room in the redo log
# buffer (Innodb_log_waits).
trace_status() {
  local prev=0 t=0
  echo "t checkpoint_age_MB max_MB dirty_pages flushed_per_s flushed_total free_pages wait_free log_waits" > "$1"
  while sleep 1; do
    t=$((t + 1))
    mariadb --no-defaults --skip-ssl -h 127.0.0.1 -P "$MYSQL_PORT" -u "$MYSQL_USER" -p"$MYSQL_PWD" -N -B -e \
      "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_checkpoint_age','Innodb_checkpoint_max_age','Innodb_buffer_pool_pages_dirty','Innodb_buffer_pool_pages_flushed','Innodb_buffer_pool_pages_free','Innodb_buffer_pool_wait_free','Innodb_log_waits')" 2>/dev/null |
      awk -v t="$t" -v prev="$prev" '{v[$1]=$2} END {printf "%d %.1f %.1f %d %d %d %d %d %d\n", t, v["Innodb_checkpoint_age"]/1048576, v["Innodb_checkpoint_max_age"]/1048576, v["Innodb_buffer_pool_pages_dirty"], v["Innodb_buffer_pool_pages_flushed"]-prev, v["Innodb_buffer_pool_pages_flushed"], v["Innodb_buffer_pool_pages_free"], v["Innodb_buffer_pool_wait_free"], v["Innodb_log_waits"]}' >> "$1"
    prev="$(tail -1 "$1" | cut -d' ' -f6)"
  done
}

recipe old
(cd "$WORK" && "$D" --store "$STORE" build >/dev/null)
# quiet waits (up to QUIET_MAX s, default 180) until the CPUs were less
# than 15 % busy over 5 s and under 32 MB of file pages wait to be written
# back: on a shared machine a run during someone
# else's test suite measures that suite. Sets busy to the last figure.
quiet() {
  local a b i
  for ((i = 0; i < ${QUIET_MAX:-180}; i += 5)); do
    read -ra a < /proc/stat; sleep 5; read -ra b < /proc/stat
    local total=0 idle=$(( b[4] + b[5] - a[4] - a[5] )) k
    for k in 1 2 3 4 5 6 7 8; do total=$(( total + b[k] - a[k] )); done
    busy=$(( 100 * (total - idle) / (total > 0 ? total : 1) ))
    # ... and the host has written back what the last run left dirty (a
    # plain copy leaves 2 GB in the store image's page cache).
    local dirty
    dirty=$(awk '/^(Dirty|Writeback):/ {s += $2} END {print int(s / 1024)}' /proc/meminfo)
    [ "$busy" -lt 15 ] && [ "$dirty" -lt 32 ] && return 0
  done
  return 0 # waited long enough: run anyway, the busy figure says so
}

# Profiles take turns (run 1 of each, then run 2 of each, ...), so a
# machine that gets busier or quieter does not favour one of them.
# bytes SIZE: 16k -> 16384, 4m -> 4194304, 0 -> 0.
bytes() {
  case "$1" in
    *[kK]) echo $(( ${1%?} << 10 )) ;;
    *[mM]) echo $(( ${1%?} << 20 )) ;;
    *[!0-9]* | '') echo "bad size $1 in PROFILE@SIZE: use bytes, or a number with k or m" >&2; exit 2 ;;
    *) echo "$1" ;;
  esac
}
used_kb() { df -k --output=used "$STORE" | tail -1; }
# xfs_counts prints the XFS store's transactions and extents allocated so
# far (/sys/fs/xfs/DEV/stats), "0 0" elsewhere.
xfs_counts() {
  local f="/sys/fs/xfs/$(basename "$(findmnt -n -o SOURCE "$STORE")")/stats/stats"
  [ -r "$f" ] || { echo 0 0; return; }
  awk '$1 == "trans" {t = $2 + $3} $1 == "extent_alloc" {e = $2} END {print t + 0, e + 0}' "$f"
}

for r in $(seq 1 "$RUNS"); do
  for p in "$@"; do
    be="$BACKEND" v="$p"
    [ "${v%/*}" != "$v" ] && be="${v##*/}" v="${v%/*}"
    warm="" upflags=()
    [ "${v%+warm}" != "$v" ] && warm=1 v="${v%+warm}"
    [ "${v%+cold}" != "$v" ] && upflags=(--no-warm) v="${v%+cold}"
    prof="${v%%@*}" cowenv=()
    if [ "$prof" != "$v" ]; then sz="$(bytes "${v#*@}")"; cowenv=(DBFORK_XFS_COWEXTSIZE="$sz"); fi
    recipe "$prof"
    busy=""; [ -n "${QUIET:-}" ] && quiet
    # DROP_CACHES=1: start each run with no file cached at all (the store
    # image's pages included), as on a machine that just booted.
    [ -n "${DROP_CACHES:-}" ] && { sync; echo 3 > /proc/sys/vm/drop_caches; }
    sync -f "$STORE"; used0="$(used_kb)"; read -r trans0 ext0 < <(xfs_counts)
    out="$(cd "$WORK" && env "${cowenv[@]}" "$D" --store "$STORE" up --no-daemon "${upflags[@]}" --backend "$be" --json)"
    id="$(sed -n 's/.*"id": "\(.*\)".*/\1/p' <<<"$out" | head -1)"
    ready="$(sed -n 's/.*"ready_ms": \([0-9.]*\).*/\1/p' <<<"$out")"
    eval "$(sed -n 's/.*"\(MYSQL_[A-Z]*\)": "\(.*\)".*/export \1=\2/p' <<<"$out")"
    warm_ms=""
    if [ -n "$warm" ]; then
      t0="$(date +%s%N)"
      find "$STORE/instances/$id/data" -type f -exec cat {} + >/dev/null
      warm_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    fi
    perfer="" sampler=""
    pid="$(sed -n 's/.*"pid": \([0-9]*\).*/\1/p' <<<"$out" | head -1)"
    if [ -n "${DSTATE:-}" ]; then
      "$(dirname "$0")/dstate-sample.py" "$pid" "$WORK/dstate-$VERSION-${p//\//-}-$r.txt" "$DSTATE" & sampler=$!
    fi
    if [ -n "${SLOW_CALLS:-}" ]; then
      perf trace -p "$pid" --duration "$SLOW_CALLS" -T -o "$WORK/calls-$VERSION-${p//\//-}-$r.txt" \
        -e 'pwrite64,pwritev,pwritev2,write,pread64,preadv,read,fsync,fdatasync,futex,io_submit,io_getevents,io_uring_enter,fallocate,ftruncate,recvfrom,poll,ppoll' & perfer=$!
      sleep 0.3 # perf trace attaches to every thread before the run starts
    fi
    extra=() tracer=""
    if [ -n "${TRACE:-}" ]; then
      extra=(--report-interval=1 --percentile=100)
      trace_status "$WORK/status-$VERSION-${p//\//-}-$r.txt" & tracer=$!
    fi
    t_start="$(cut -d' ' -f1 /proc/uptime)" # seconds since boot: the samplers' clock
    res="$(sysbench oltp_write_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$MYSQL_PORT" \
      --mysql-user="$MYSQL_USER" --mysql-password="$MYSQL_PWD" --mysql-db="$MYSQL_DATABASE" \
      --tables="$TABLES" --table-size="$ROWS" --threads=1 --time="$SECONDS_" --percentile=95 "${extra[@]}" run)"
    used1="$(used_kb)"; sync -f "$STORE"; read -r trans1 ext1 < <(xfs_counts)
    # the hint the clone's first table file carries (what XFS applies)
    hint="$(xfs_io -c stat "$STORE/instances/$id/data/$MYSQL_DATABASE/sbtest1.ibd" 2>/dev/null | sed -n 's/^fsxattr.cowextsize = //p')"
    if [ -n "$tracer" ]; then
      kill "$tracer"; wait "$tracer" 2>/dev/null || true
      { echo "# sysbench started at $t_start s since boot"; grep '^\[' <<<"$res"; cat "$WORK/status-$VERSION-${p//\//-}-$r.txt"; } > "$WORK/trace-$VERSION-${p//\//-}-$r.txt"
    fi
    [ -n "$perfer" ] && { kill -INT "$perfer"; wait "$perfer" 2>/dev/null || true; }
    [ -n "$sampler" ] && { kill "$sampler"; wait "$sampler" 2>/dev/null || true; }
    "$D" --store "$STORE" down "$id" >/dev/null
    tps="$(sed -n 's/.*transactions: *[0-9]* *(\([0-9.]*\) per sec.*/\1/p' <<<"$res")"
    p95="$(sed -n 's/.*95th percentile: *\([0-9.]*\).*/\1/p' <<<"$res")"
    max="$(sed -n 's/.*max: *\([0-9.]*\).*/\1/p' <<<"$res")"
    printf '%s %-8s %-13s run %d  ready %6.0f ms  tps %7.1f  p95 %6.2f ms  max %7.2f ms  disk +%d MB  hint %s  xfs trans %d extents %d  load %s%s%s\n' \
      "$VERSION" "$be" "${p%/*}" "$r" "$ready" "$tps" "$p95" "$max" $(((used1 - used0) / 1024)) "${hint:-?}" $((trans1 - trans0)) $((ext1 - ext0)) "$(cut -d' ' -f1 /proc/loadavg)" "${busy:+  busy before ${busy}%}" "${warm_ms:+  warm ${warm_ms} ms}"
  done
done
