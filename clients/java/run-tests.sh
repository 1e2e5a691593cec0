#!/usr/bin/env bash
# Runs the JUnit tests against a throwaway store. Nothing starts a daemon
# here: the extension does, by the rule of docs/api.md. Afterwards no
# instance may be left once the daemon is stopped and gc has run.
set -euo pipefail
cd "$(dirname "$0")"
: "${DBFORK_BIN:?set DBFORK_BIN to the dbfork binary}"
root="$(mktemp -d /tmp/dbfork-java-XXXXXX)"
chmod 755 "$root"
export DBFORK_STORE="$root/store" DBFORK_STORE_FS=plain DBFORK_DAEMON_IDLE=2s
unset DBFORK_SOCKET DBFORK_RECIPE
cleanup() {
  "$DBFORK_BIN" daemon stop >/dev/null 2>&1 || true
  "$DBFORK_BIN" gc --all >/dev/null 2>&1 || true
  "$DBFORK_BIN" store umount >/dev/null 2>&1 || true # a plain store root is opened as a bind mount
  umount -R "$root" 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT
mvn -B -ntp -Pintegration test
"$DBFORK_BIN" daemon stop >/dev/null 2>&1 || true
"$DBFORK_BIN" gc --all >/dev/null
left="$("$DBFORK_BIN" ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["instances"] or []))')"
if [ "$left" != 0 ]; then
  echo "clients/java: $left instance(s) left after the tests" >&2
  "$DBFORK_BIN" ls >&2
  exit 1
fi
