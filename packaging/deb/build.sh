#!/usr/bin/env bash
# Part of scripts/release.sh (VERSION, SRC, OUT set): dbfork_VERSION_ARCH.deb
# for amd64 and arm64 with dpkg-deb: /usr/bin/dbfork, the README and docs,
# and every command's --help text (usr/share/doc/dbfork/commands.txt).
# No maintainer scripts: installing changes nothing but these files; the
# store and its daemon are made by whoever runs dbfork.
set -euo pipefail
mkdir -p "$OUT/deb"
help="$(mktemp)"
trap 'rm -f "$help"' EXIT
# The --help of every command, from the amd64 build (the text is the
# same on every platform); root first, then each subcommand.
bin="$OUT/dbfork-linux-amd64"
{
  "$bin" --help
  "$bin" __complete "" 2>/dev/null | grep -v '^:' | cut -f1 | grep -v -e '^completion$' -e '^help$' -e '^$' |
    while read -r c; do printf '\n\n===== dbfork %s =====\n\n' "$c"; "$bin" "$c" --help; done
} > "$help"
for arch in amd64 arm64; do
  d="$(mktemp -d)"
  install -D -m 755 "$OUT/dbfork-linux-$arch" "$d/usr/bin/dbfork"
  doc="$d/usr/share/doc/dbfork"
  install -D -m 644 "$SRC/README.md" "$doc/README.md"
  for f in "$SRC"/docs/*.md; do install -D -m 644 "$f" "$doc/docs/$(basename "$f")"; done
  install -m 644 "$help" "$doc/commands.txt"
  printf 'dbfork %s\nLicense: MIT\nSource: the dbfork repository, tag v%s\n' "$VERSION" "$VERSION" > "$doc/copyright"
  mkdir -p "$d/DEBIAN"
  cat > "$d/DEBIAN/control" <<CTL
Package: dbfork
Version: $VERSION
Architecture: $arch
Maintainer: dbfork developers <dbfork@users.noreply.github.com>
Section: devel
Priority: optional
Installed-Size: $(du -sk "$d/usr" | cut -f1)
Recommends: postgresql | mariadb-server, xfsprogs
Homepage: https://github.com/dbfork/dbfork
Description: instant copy-on-write clones of seeded test databases
 dbfork builds a "golden" PostgreSQL or MariaDB data directory once from a
 recipe (dbfork.toml) and gives every test its own writable copy-on-write
 clone of it, with a server running on it, in milliseconds.
CTL
  find "$d" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
  dpkg-deb --root-owner-group -Zgzip --build "$d" "$OUT/deb/dbfork_${VERSION}_$arch.deb" >/dev/null
  rm -rf "$d"
done
