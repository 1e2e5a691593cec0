#!/usr/bin/env bash
# Installs what scripts/release.sh builds the way a new user would, each
# in a fresh account (nobody, HOME in a temp dir, no checkout and no Go on
# PATH), and runs a small project per ecosystem against a real golden:
# the pytest wheel (pytest -n and manage.py test --parallel), the npm
# tarballs, the Maven artifacts, the Perl distribution, the Go module
# proxy (Go on PATH there: the user's own) and the Debian package.
# TEST_INSTALL_ONLY="python node java perl go deb" picks checks.
source "$(dirname "$0")/lib.sh"
need_root "the install checks"
ensure_go
ONLY="${TEST_INSTALL_ONLY-python node java perl go deb api}"
VERSION=0.9.0
# Short paths: a server socket under the store must fit in 107 bytes.
WORK="$(mktemp -d /tmp/dbfi-XXXXXX)"
chmod 755 "$WORK"
OUT="$WORK/out"
ARCH="$(dpkg --print-architecture)"
case "$ARCH" in amd64) PYPLAT=x86_64 NODEARCH=x64 ;; arm64) PYPLAT=aarch64 NODEARCH=arm64 ;; esac
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for h in "$WORK"/h-*; do
    [ -d "$h" ] || continue
    # The user's on-demand daemon and anything left in its store, by
    # whichever dbfork that user's install brought.
    local b
    b="$(user_dbfork "$h")" || continue
    as_user "$h" "$b" daemon stop >/dev/null 2>&1 || true
    as_user "$h" "$b" gc --all >/dev/null 2>&1 || true
  done
  dpkg-query -W dbfork >/dev/null 2>&1 && apt-get remove -y -qq dbfork >/dev/null 2>&1 || true
  # Stores root opened are mounts (an image, or a plain store's nosuid
  # bind): unmount them, deepest first, before removing anything.
  awk -v w="$WORK/" 'index($2, w) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do umount "$m" || true; done
  if grep -q " $WORK/" /proc/self/mounts; then
    echo "test-install: $WORK is still mounted; leaving it" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT

step() { echo "test-install: $*" >&2; }
fail() { echo "test-install: FAIL: $*" >&2; exit 1; }

# new_home NAME: a fresh home dir for nobody.
new_home() {
  local h="$WORK/$1"
  mkdir -p "$h"
  chown 65534:65534 "$h"
  echo "$h"
}

# as_user HOME CMD...: runs CMD as nobody with a new user's environment:
# its own HOME (so its own default store), no Go, no checkout on PATH; in
# $IN (a project dir) when set, else in HOME.
as_user() {
  local h="$1"
  shift
  (cd "${IN:-$h}" && setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all -- \
    env -i HOME="$h" PATH="$h/bin:/usr/local/bin:/usr/bin:/bin" LANG=C.UTF-8 USER=nobody \
    XDG_DATA_HOME="$h/.local/share" XDG_CACHE_HOME="$h/.cache" NPM_CONFIG_UPDATE_NOTIFIER=false DBFORK_STORE_FS=plain DBFORK_DAEMON_IDLE=2s "$@")
}

# user_dbfork HOME: the dbfork a user's install brought (for clean-up).
user_dbfork() {
  local b
  for b in "$1"/bin/dbfork "$1"/venv/lib/python3*/site-packages/pytest_dbfork/bin/dbfork \
    "$1"/proj/node_modules/@dbfork/linux-*/bin/dbfork "$1"/go/bin/dbfork "$1"/.cache/dbfork/bin/*/dbfork \
    /usr/bin/dbfork; do
    [ -x "$b" ] && { echo "$b"; return 0; }
  done
  return 1
}

# A recipe every project uses: one table, one seeded row.
write_recipe() {
  cat > "$1/dbfork.toml" <<'TOML'
engine = "postgres"
database = "app"
[[load]]
sql = ["seed.sql"]
TOML
  echo "create table notes(id serial primary key, who text not null); insert into notes(who) values ('golden');" > "$1/seed.sql"
}

step "release.sh $VERSION"
parts="$(sed 's/java/maven/; s/\bapi\b//' <<<"$ONLY")"
RELEASE_ONLY="$parts" "$REPO/scripts/release.sh" "$VERSION" "$OUT"
chmod -R a+rX "$OUT"
(cd "$OUT" && sha256sum --quiet -c SHA256SUMS) || fail "SHA256SUMS does not match the artifacts"

for part in $ONLY; do
  step "$part"
  source "$REPO/packaging/test/$part.sh"
done
step "all install checks passed"
