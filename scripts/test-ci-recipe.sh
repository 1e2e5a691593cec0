#!/usr/bin/env bash
# Runs the CI jobs of docs/ci.md as written there (scripts/ci-recipe-steps.py
# reads their steps out of the doc) against a CNCF distribution registry
# on 127.0.0.1 that asks for a user and password:
#   - root jobs in a fresh root shell (env -i, a store of their own),
#   - unprivileged jobs as nobody with a temp HOME, no capabilities and
#     user namespaces refused (bench/nouserns), as in a docker executor;
# each twice: the first run builds and pushes, the second (a fresh store)
# pulls and builds nothing. Asserts the same key both times, the second's
# golden pulled, `make test` ran against the golden's data, and what the
# job's `dbfork doctor` said `auto` picks (copy in the container); and
# that on an XFS volume mounted into the container it picks reflink
# (bench/unpriv-container.sh check).
#   sudo scripts/test-ci-recipe.sh [JOB...]   (default: every job in the doc)
source "$(dirname "$0")/lib.sh"
need_root "the CI recipe test"
ensure_go
DOC="${TEST_CI_DOC:-$REPO/docs/ci.md}"   # another copy of the doc, to see the test fail
JOBS=("$@")
[ ${#JOBS[@]} -gt 0 ] || mapfile -t JOBS < <(sed -n 's/^<!-- ci-test: \([a-z-]*\) -->$/\1/p' "$DOC")
# Short paths: a server socket under the store must fit in 107 bytes.
W="$(mktemp -d /tmp/dbci-XXXXXX)"
chmod 755 "$W"
REGPID=""
cleanup() {
  [ -n "$REGPID" ] && kill "$REGPID" 2>/dev/null || true
  # Every store this test made: its instances, goldens and daemon, by the
  # user that owns it; then root's (a loop-mounted image or a plain
  # store's nosuid bind of itself) unmounted, before anything is removed.
  for s in "$W"/s-* "$W"/h-*/.local/share/dbfork; do
    [ -d "$s" ] || continue
    local run=()
    [ "$(stat -c %u "$s")" = 0 ] || run=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
    "${run[@]}" "$W/bin/dbfork" --store "$s" daemon stop >/dev/null 2>&1 || true
    "${run[@]}" "$W/bin/dbfork" --store "$s" down --all >/dev/null 2>&1 || true
    "${run[@]}" "$W/bin/dbfork" --store "$s" gc --all >/dev/null 2>&1 || true
    [ -n "${run[*]}" ] || "$W/bin/dbfork" --store "$s" store umount >/dev/null 2>&1 || true
  done
  if grep -q " $W/" /proc/self/mounts; then
    echo "test-ci-recipe: $W is still mounted; leaving it" >&2
  else
    rm -rf "$W"
  fi
}
trap cleanup EXIT
step() { echo "test-ci-recipe: $*" >&2; }
fail() { echo "test-ci-recipe: FAIL: $*" >&2; exit 1; }

mkdir -p "$W/bin"
(cd "$REPO" && go build -o "$W/bin/dbfork" ./cmd/dbfork && go build -o "$W/ociregistry" ./bench/ociregistry &&
  go build -o "$W/nouserns" ./bench/nouserns)
# Root jobs call `sudo -E CMD`; the test's shell is root already.
printf '#!/bin/sh\n[ "$1" = -E ] && shift\nexec "$@"\n' >"$W/bin/sudo"
chmod 755 "$W/bin" "$W/bin/sudo"

USER_=ci PASS_="s3cret-$RANDOM$RANDOM"
mkdir -p "$W/registry"
"$W/ociregistry" -root "$W/registry" -user "$USER_" -password "$PASS_" >"$W/registry.addr" 2>"$W/registry.log" &
REGPID=$!
for _ in $(seq 200); do [ -s "$W/registry.addr" ] && break; sleep 0.05; done
REG="$(cat "$W/registry.addr")"
[ -n "$REG" ] || fail "the registry did not start: $(cat "$W/registry.log")"

# The project: one table, one row; `make test` reads it from the clone.
mkdir -p "$W/proj"
cat >"$W/proj/dbfork.toml" <<'TOML'
engine = "postgres"
database = "app"
[[load]]
sql = ["seed.sql"]
TOML
echo "create table notes(id serial primary key, who text not null); insert into notes(who) values ('golden');" >"$W/proj/seed.sql"
printf 'test:\n\tpsql -XAtq -v ON_ERROR_STOP=1 -c "select who from notes" > test-ran.txt\n' >"$W/proj/Makefile"

# job_env JOB HOME: the environment a runner gives the job, plus the
# test's stand-ins for the registry (see ci-recipe-steps.py).
job_env() {
  echo HOME="$2" PATH="$W/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" LANG=C.UTF-8 \
    TEST_REGISTRY="$REG" TEST_REPOSITORY="acme/$1" TEST_USER="$USER_" TEST_PASSWORD="$PASS_" \
    CI_REGISTRY="$REG" CI_REGISTRY_IMAGE="$REG/acme/$1" CI_REGISTRY_USER="$USER_" CI_REGISTRY_PASSWORD="$PASS_" \
    DBFORK_REGISTRY_PLAIN_HTTP="$REG"
}

# run_job JOB N: the job's steps in a fresh home and store, in a fresh
# copy of the project; prints the key and origin of the store's golden.
run_job() {
  local job="$1" n="$2" h p store as=()
  h="$W/h-$n"
  p="$W/p-$n"
  mkdir -p "$h"
  cp -r "$W/proj" "$p"
  python3 "$REPO/scripts/ci-recipe-steps.py" "$DOC" "$job" >"$W/steps-$n.sh" || fail "reading $job from docs/ci.md"
  chmod 644 "$W/steps-$n.sh"
  local env
  read -ra env <<<"$(job_env "$job" "$h")"
  case "$job" in
  *-root)
    store="$W/s-$n"
    env+=(DBFORK_STORE="$store")
    ;;
  *)
    chown -R 65534:65534 "$h" "$p"
    store="$h/.local/share/dbfork"
    env+=(USER=nobody)
    as=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all -- "$W/nouserns")
    ;;
  esac
  (cd "$p" && "${as[@]}" env -i "${env[@]}" bash "$W/steps-$n.sh") >"$W/out-$n.log" 2>&1 ||
    fail "$job run $n: the steps failed:
$(tail -30 "$W/out-$n.log")"
  # What the job's `dbfork doctor` said `auto` picks: in the simulated
  # container (ext4, no user namespaces) a full copy; as root, a
  # copy-on-write store dbfork made itself.
  local pick
  pick="$(sed -n 's/^  auto picks \([a-z-]*\):.*/\1/p' "$W/out-$n.log")"
  case "$job" in
  *-root) [ "$pick" = overlay ] || [ "$pick" = reflink ] ;;
  *) [ "$pick" = copy ] ;;
  esac || fail "$job run $n: auto picks '$pick':
$(grep -A8 '^backends' "$W/out-$n.log")"
  echo "test-ci-recipe: $job run $n: $(grep -m1 '^store ' "$W/out-$n.log"); auto picks $pick" >&2
  [ "$(cat "$p/test-ran.txt" 2>/dev/null)" = golden ] || fail "$job run $n: make test did not read the golden's row (test-ran.txt: $(cat "$p/test-ran.txt" 2>&1))"
  (cd "$p" && "${as[@]}" env -i "${env[@]}" "$W/bin/dbfork" --store "$store" ls --json) >"$W/ls-$n.json" ||
    fail "$job run $n: dbfork ls in the job's store"
  python3 - "$W/ls-$n.json" "$store" <<'PY' || fail "$job run $n: $(cat "$W/ls-$n.json")"
import json, sys
d = json.load(open(sys.argv[1]))
g = [x for x in d["goldens"] if not x.get("intermediate")]
assert len(g) == 1, f"{len(g)} goldens in the store"
assert g[0]["dir"].startswith(sys.argv[2] + "/"), f"golden in {g[0]['dir']}, not in the job's store"
print(g[0]["key"], g[0]["origin"])
PY
}

# Credentials matter: an anonymous pull of the registry is refused.
if "$W/bin/dbfork" --store "$W/s-anon" pull "$REG/acme/none:latest" >"$W/anon.log" 2>&1; then
  fail "the registry let an anonymous pull through: the credentials would not be tested"
fi
grep -q 'refused access\|401' "$W/anon.log" || fail "anonymous pull: $(cat "$W/anon.log")"

# What `auto` picks in the simulated container, on the container's disk
# and on an XFS volume mounted in (docs/ci.md's claims).
step "bench/unpriv-container.sh check"
"$REPO/bench/unpriv-container.sh" check >&2 || fail "auto's picks in the simulated unprivileged container"

n=0
for job in "${JOBS[@]}"; do
  n=$((n + 1))
  step "$job: first run (empty store, empty registry repository)"
  read -r key1 origin1 < <(run_job "$job" "${n}a")
  [ "$origin1" = build ] || fail "$job first run: golden $key1 came from '$origin1', want a build"
  step "$job: second run (a fresh store)"
  read -r key2 origin2 < <(run_job "$job" "${n}b")
  [ "$key2" = "$key1" ] || fail "$job second run: key $key2, the first run built $key1"
  case "$origin2" in
  "pull $REG/acme/$job"*) ;;
  *) fail "$job second run: golden $key2 came from '$origin2', want a pull from $REG/acme/$job" ;;
  esac
  step "$job: ok (key $key1 built, pushed, then pulled; make test ran twice)"
done
step "all ${#JOBS[@]} CI jobs of docs/ci.md passed"
