#!/usr/bin/env bash
# Part of scripts/release.sh (VERSION, SRC, OUT set): this module as a Go
# module proxy directory, OUT/goproxy/github.com/dbfork/dbfork/@v/ with
# list, vVERSION.info, .mod and .zip: the layout `go mod download` reads
# from GOPROXY=file://OUT/goproxy. It is what `go install
# github.com/dbfork/dbfork/cmd/dbfork@vVERSION` and `go get
# github.com/dbfork/dbfork/dbforktest@vVERSION` fetch; the tag vVERSION
# in the repository gives the same through any proxy.
set -euo pipefail
SRC="$(mktemp -d)"
trap 'rm -rf "$SRC"' EXIT
tar -x -C "$SRC" -f "$SRC_TAR"
mod="$(awk '/^module /{print $2; exit}' "$SRC/go.mod")"
dir="$OUT/goproxy/$mod/@v"
mkdir -p "$dir"
v="v$VERSION"
echo "$v" > "$dir/list"
printf '{"Version":"%s","Time":"%s"}\n' "$v" "$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)" > "$dir/$v.info"
cp "$SRC/go.mod" "$dir/$v.mod"
python3 - "$SRC" "$mod@$v" "$dir/$v.zip" <<'PY'
# The module zip by the rules of golang.org/x/mod/zip: every regular file
# under MODULE@VERSION/, without vendor/ directories, directories that are
# modules of their own (a go.mod of their own) or version-control dirs.
import os, sys, time, zipfile
src, prefix, out = sys.argv[1:]
stamp = time.gmtime(max(int(os.environ["SOURCE_DATE_EPOCH"]), 315532800))[:6]
files = []
for d, dirs, names in os.walk(src):
    rel = os.path.relpath(d, src)
    keep = []
    for x in sorted(dirs):
        sub = os.path.join(d, x)
        if x in (".git", ".hg", ".svn", "vendor") or os.path.exists(os.path.join(sub, "go.mod")):
            continue
        keep.append(x)
    dirs[:] = keep
    for n in names:
        p = os.path.join(d, n)
        if os.path.islink(p) or not os.path.isfile(p):
            continue
        files.append(os.path.normpath(os.path.join(rel, n)))
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for f in sorted(files):
        info = zipfile.ZipInfo(prefix + "/" + f, stamp)
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, open(os.path.join(src, f), "rb").read())
PY
