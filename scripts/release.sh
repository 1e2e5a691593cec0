#!/usr/bin/env bash
# scripts/release.sh VERSION OUTDIR: every artifact a user installs, built
# from this checkout's committed files:
#   OUTDIR/dbfork-linux-{amd64,arm64}     static binaries, version stamped
#   OUTDIR/python/   wheels (one per platform, binary inside) and the sdist
#   OUTDIR/node/     @dbfork/node and @dbfork/linux-{x64,arm64} tarballs
#   OUTDIR/maven/    a Maven repository: dbfork-binary-linux-* and dbfork-junit
#   OUTDIR/perl/     the CPAN-style Test-Dbfork distribution
#   OUTDIR/goproxy/  a module proxy directory (GOPROXY=file://OUTDIR/goproxy)
#   OUTDIR/deb/      dbfork_VERSION_{amd64,arm64}.deb
#   OUTDIR/SHA256SUMS
# The binaries are reproducible: each is built twice and the script fails
# if the two differ (RELEASE_COLD=1: the second without the build cache).
# RELEASE_ONLY="python node maven perl go deb" (or a subset, or empty)
# picks parts (the binaries are always built).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${1:?usage: scripts/release.sh VERSION OUTDIR}"
OUT="${2:?usage: scripts/release.sh VERSION OUTDIR}"
case "$VERSION" in
  v*) echo "release.sh: give the version without the v ($VERSION)" >&2; exit 2 ;;
esac
if ! [[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+([.-][0-9A-Za-z.]+)?$ ]]; then
  echo "release.sh: version $VERSION is not MAJOR.MINOR.PATCH[-pre]" >&2
  exit 2
fi
ONLY="${RELEASE_ONLY-python node maven perl go deb}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
# Artifacts that record file times (wheels, tarballs, jars) take the commit's.
SOURCE_DATE_EPOCH="$(git -C "$REPO" log -1 --format=%ct)"
export VERSION OUT REPO SOURCE_DATE_EPOCH

# A clean copy of the committed tree: nothing a developer has lying around
# (bin/, node_modules, target/, uncommitted edits) gets into an artifact.
if [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no)" ]; then
  echo "release.sh: uncommitted changes are not in the release (it builds HEAD)" >&2
fi
# Parts may edit SRC (versions into package files) and build in it; the
# Go module zip takes its files from SRC_TAR, untouched.
TMP="$(mktemp -d /tmp/dbfork-release-XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
SRC="$TMP/src" SRC_TAR="$TMP/src.tar"
git -C "$REPO" archive --format=tar -o "$SRC_TAR" HEAD
mkdir "$SRC"
tar -x -C "$SRC" -f "$SRC_TAR"
export SRC SRC_TAR

build() { # GOARCH DEST
  (cd "$SRC" && env -u GOFLAGS CGO_ENABLED=0 GOOS=linux GOARCH="$1" \
    go build -trimpath -buildvcs=false -mod=readonly \
    -ldflags "-s -w -buildid= -X github.com/dbfork/dbfork/internal/api.stamp=$VERSION" \
    -o "$2" ./cmd/dbfork)
}
for arch in amd64 arm64; do
  build "$arch" "$OUT/dbfork-linux-$arch"
  # Reproducible: a second build from another directory gives the same
  # bytes. RELEASE_COLD=1 makes it compile everything again (an empty
  # build cache: minutes more), not only link.
  again="$(mktemp -d /tmp/dbfork-release-again-XXXXXX)"
  cp -a "$SRC/." "$again/"
  if [ "${RELEASE_COLD:-}" = 1 ]; then
    (SRC="$again" GOCACHE="$again/.gocache" build "$arch" "$again/dbfork")
  else
    (SRC="$again" build "$arch" "$again/dbfork")
  fi
  a="$(sha256sum < "$OUT/dbfork-linux-$arch")" b="$(sha256sum < "$again/dbfork")"
  rm -rf "$again"
  if [ "$a" != "$b" ]; then
    echo "release.sh: dbfork-linux-$arch is not reproducible ($a vs $b)" >&2
    exit 1
  fi
done
"$OUT/dbfork-linux-amd64" version | grep -qF "dbfork $VERSION " ||
  { echo "release.sh: the amd64 binary does not say version $VERSION" >&2; exit 1; }

for part in $ONLY; do
  echo "release.sh: $part" >&2
  bash "$SRC/packaging/$part/build.sh"
done

(cd "$OUT" && find . -type f ! -name SHA256SUMS ! -path './maven/*' ! -path './goproxy/*' -printf '%P\n' | LC_ALL=C sort |
  xargs sha256sum > SHA256SUMS)
echo "release.sh: $OUT" >&2
