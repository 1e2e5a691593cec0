#!/usr/bin/env bash
# Part of scripts/release.sh (VERSION, SRC, OUT set): `npm pack` of
# @dbfork/node, whose optionalDependencies name one package per platform,
# and of those packages (@dbfork/linux-x64, @dbfork/linux-arm64), each
# carrying its static dbfork and saying its os and cpu, so npm installs
# only the one for the machine (the pattern esbuild and others use).
set -euo pipefail
mkdir -p "$OUT/node"
node_dir="$SRC/clients/node"
(cd "$node_dir" && VERSION="$VERSION" node -e '
  const fs = require("fs");
  const p = JSON.parse(fs.readFileSync("package.json"));
  p.version = process.env.VERSION;
  p.optionalDependencies = { "@dbfork/linux-x64": p.version, "@dbfork/linux-arm64": p.version };
  delete p.devDependencies;
  delete p.scripts;
  fs.writeFileSync("package.json", JSON.stringify(p, null, 2) + "\n");
')
(cd "$node_dir" && npm pack -q --pack-destination "$OUT/node" >/dev/null)
for arch in amd64 arm64; do
  cpu="$([ "$arch" = amd64 ] && echo x64 || echo arm64)"
  d="$(mktemp -d)"
  mkdir -p "$d/bin"
  install -m 755 "$OUT/dbfork-linux-$arch" "$d/bin/dbfork"
  cat > "$d/package.json" <<JSON
{
  "name": "@dbfork/linux-$cpu",
  "version": "$VERSION",
  "description": "The dbfork binary for Linux $cpu, used by @dbfork/node",
  "license": "MIT",
  "os": ["linux"],
  "cpu": ["$cpu"],
  "files": ["bin/dbfork"]
}
JSON
  echo "The dbfork binary for Linux $cpu. Install @dbfork/node: it depends on this package." > "$d/README.md"
  (cd "$d" && npm pack -q --pack-destination "$OUT/node" >/dev/null)
  rm -rf "$d"
done
