#!/usr/bin/env bash
# Measures what an OverlayFS clone of a MariaDB golden copies up before and
# after its first writes, for MariaDB's default data dir layout and for the
# layout dbfork builds (16 MiB redo log, separate undo tablespaces, no
# buffer pool dump). Needs root, mariadb-server, an ext4 /tmp.
#   sudo bench/mariadb-copyup.sh [ROWS_PER_TABLE] [TABLES]
set -euo pipefail
ROWS="${1:-250000}"
TABLES="${2:-4}"
W="$(mktemp -d /tmp/copyup-XXXX)"
chmod 755 "$W"
trap 'for m in "$W"/*/merged; do umount "$m" 2>/dev/null || true; done; rm -rf "$W"' EXIT
id dbfork >/dev/null 2>&1 || useradd --system --user-group --no-create-home --shell /usr/sbin/nologin dbfork
as() { setpriv --reuid=dbfork --regid=dbfork --clear-groups "$@"; }

declare -A INIT START
INIT[default]=""
START[default]=""
INIT[dbfork]="--innodb-log-file-size=16M --innodb-undo-tablespaces=3 --innodb-buffer-pool-dump-at-shutdown=0 --innodb-change-buffering=none"
START[dbfork]="--innodb-log-file-size=16M --innodb-undo-tablespaces=3 --innodb-buffer-pool-load-at-startup=0 --innodb-buffer-pool-dump-at-shutdown=0 --innodb-change-buffering=none"
TEST="--skip-log-bin --performance-schema=0 --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --innodb-buffer-pool-size=64M"

start() { # datadir sockdir extra... ; prints ms to first successful query
  local d="$1" s="$2"; shift 2
  local t0; t0=$(date +%s%N)
  (cd / && as mariadbd --no-defaults --datadir="$d" --socket="$s/sock" --pid-file="$s/pid" --skip-networking "$@" &) >"$s/log" 2>&1 </dev/null
  until mariadb --no-defaults --socket="$s/sock" -uroot -e 'select 1' >/dev/null 2>&1; do sleep 0.005; done
  echo $(( ($(date +%s%N) - t0) / 1000000 ))
}
stop() { kill "$(cat "$1/pid")"; while [ -e "$1/pid" ]; do sleep 0.05; done; }

for layout in default dbfork; do
  G="$W/$layout"; mkdir -p "$G/golden" "$G/sock"; chown -R dbfork:dbfork "$G"
  (cd / && as mariadb-install-db --no-defaults --datadir="$G/golden" --auth-root-authentication-method=normal --skip-test-db ${INIT[$layout]} >/dev/null)
  start "$G/golden" "$G/sock" ${START[$layout]} >/dev/null
  for t in $(seq 1 "$TABLES"); do
    mariadb --no-defaults --socket="$G/sock/sock" -uroot -e "CREATE DATABASE IF NOT EXISTS sb; USE sb; CREATE TABLE sb.sbtest$t (id int AUTO_INCREMENT PRIMARY KEY, k int NOT NULL, c char(120) NOT NULL, pad char(60) NOT NULL, KEY k_$t (k)); INSERT INTO sb.sbtest$t (k, c, pad) SELECT seq % 10000, REPEAT('c', 119), REPEAT('p', 59) FROM seq_1_to_$ROWS;"
  done
  mariadb --no-defaults --socket="$G/sock/sock" -uroot -e "SET GLOBAL innodb_fast_shutdown = 0"
  stop "$G/sock"
  rm -f "$G/golden/ib_buffer_pool.dbfork-unused"
  mkdir -p "$G/upper" "$G/work" "$G/merged" "$G/csock"
  chown dbfork:dbfork "$G/upper" "$G/csock"; chmod 700 "$G/upper"
  mount -t overlay overlay -o "lowerdir=$G/golden,upperdir=$G/upper,workdir=$G/work,index=off" "$G/merged"
  ready=$(start "$G/merged" "$G/csock" ${START[$layout]} $TEST)
  up_ready=$(du -sb "$G/upper" | cut -f1)
  echo "$layout: upper at ready:" >&2; (cd "$G/upper" && find . -type f -size +1M -printf '  %p %s\n' >&2)
  echo "$layout: golden:" >&2; (cd "$G/golden" && find . -type f -size +1M -printf '  %p %s\n' >&2)
  lat=""
  for i in $(seq 1 10); do
    t0=$(date +%s%N)
    mariadb --no-defaults --socket="$G/csock/sock" -uroot -e "INSERT INTO sb.sbtest1 (k, c, pad) VALUES ($i, 'x', 'y')"
    lat="$lat $(( ($(date +%s%N) - t0) / 1000000 ))"
  done
  up_write=$(du -sb "$G/upper" | cut -f1)
  stop "$G/csock"
  umount "$G/merged"
  printf '%-8s golden %5d MiB  ready %4d ms  upper at ready %5d MiB  after 10 inserts %5d MiB  insert ms:%s\n' \
    "$layout" $(( $(du -sb "$G/golden" | cut -f1) >> 20 )) "$ready" $(( up_ready >> 20 )) $(( up_write >> 20 )) "$lat"
done
