#!/usr/bin/env bash
# Part of scripts/release.sh (VERSION, SRC, OUT set): a Maven repository
# in OUT/maven holding
#   io.dbfork:dbfork-binary-linux-amd64 / -arm64  the static binary as a
#     resource (io/dbfork/binary/linux-ARCH/dbfork and dbfork.sha256),
#     which dbfork-junit unpacks to a cache dir at first use;
#   io.dbfork:dbfork-junit  the JUnit 5 extension, depending on both.
# Point a <repository> at it, or copy its io/ into ~/.m2/repository.
set -euo pipefail
repo="$OUT/maven"
mkdir -p "$repo"

# put ARTIFACT FILE EXT: into the repository layout, with a .sha1 beside.
put() {
  local d="$repo/io/dbfork/$1/$VERSION"
  mkdir -p "$d"
  cp "$2" "$d/$1-$VERSION.$3"
  sha1sum < "$2" | cut -d' ' -f1 > "$d/$1-$VERSION.$3.sha1"
}

for arch in amd64 arm64; do
  a="dbfork-binary-linux-$arch"
  python3 - "$OUT/dbfork-linux-$arch" "$arch" "$OUT/$a.jar" <<'PY'
import hashlib, os, sys, time, zipfile
binary, arch, jar = sys.argv[1:]
# Fixed times and order, so the jar is the same bytes on every build.
stamp = time.gmtime(max(int(os.environ["SOURCE_DATE_EPOCH"]), 315532800))[:6]
data = open(binary, "rb").read()
def add(z, name, content, mode=0o644):
    info = zipfile.ZipInfo(name, stamp)
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, content)
with zipfile.ZipFile(jar, "w") as z:
    add(z, "META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nCreated-By: dbfork release.sh\r\n\r\n")
    add(z, "io/dbfork/binary/linux-%s/dbfork" % arch, data, 0o755)
    add(z, "io/dbfork/binary/linux-%s/dbfork.sha256" % arch, hashlib.sha256(data).hexdigest() + "\n")
PY
  cat > "$OUT/$a.pom" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<project>
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.dbfork</groupId>
  <artifactId>$a</artifactId>
  <version>$VERSION</version>
  <name>dbfork binary for linux $arch</name>
  <description>The static dbfork binary as a resource; dbfork-junit unpacks and runs it</description>
  <licenses><license><name>MIT</name></license></licenses>
</project>
XML
  put "$a" "$OUT/$a.jar" jar
  put "$a" "$OUT/$a.pom" pom
  rm "$OUT/$a.jar" "$OUT/$a.pom"
done

java="$SRC/clients/java"
python3 - "$java/pom.xml" "$VERSION" <<'PY'
import re, sys
path, version = sys.argv[1:]
s = open(path).read()
s = s.replace("<artifactId>dbfork-junit</artifactId>\n  <version>0.1.0</version>",
              "<artifactId>dbfork-junit</artifactId>\n  <version>%s</version>" % version, 1)
deps = "".join("""    <dependency>
      <groupId>io.dbfork</groupId>
      <artifactId>dbfork-binary-linux-%s</artifactId>
      <version>${project.version}</version>
    </dependency>
""" % arch for arch in ("amd64", "arm64"))
marker = re.search(r"    <!-- dbfork-binary-linux-amd64 and -arm64.*?-->\n", s, re.S)
if not marker or version not in s:
    sys.exit("packaging/maven: clients/java/pom.xml lost its version or its binary marker")
s = s[:marker.start()] + deps + s[marker.end():]
open(path + ".release", "w").write(s)
PY
# Built before the binary dependencies are in its pom: they are in no
# repository Maven knows yet, and the code does not need them to compile.
sed -i "0,/<version>0.1.0<\/version>/s//<version>$VERSION<\/version>/" "$java/pom.xml"
(cd "$java" && mvn -B -q -ntp -Dproject.build.outputTimestamp="$SOURCE_DATE_EPOCH" package >&2)
put dbfork-junit "$java/target/dbfork-junit-$VERSION.jar" jar
put dbfork-junit "$java/pom.xml.release" pom
