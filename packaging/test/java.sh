# scripts/test-install.sh: the Maven artifacts put into a temp local
# repository (as `OUT/maven`'s io/ copied into ~/.m2/repository), then a
# fresh project made of clients/java/README.md's pom, test and
# junit-platform.properties runs against a real golden with no DBFORK_BIN
# and no dbfork on PATH: the binary comes from dbfork-binary-linux-*.
# As nobody with its own ~/.m2: the local repository starts as a copy of
# root's (copied, so the user is given nothing of root's), so only what
# the README's pom adds beyond clients/java's is downloaded.
h="$(new_home h-java)"
proj="$h/proj"
m2="$h/.m2/repository"
mkdir -p "$proj/src/test/java/com/example" "$proj/src/test/resources" "$m2"
cp -a "$HOME/.m2/repository/." "$m2/"
rm -rf "$m2/io/dbfork"
cp -r "$OUT/maven/io" "$m2/"
readme="$REPO/clients/java/README.md"
block() { awk -v want="$1" '$0 == "```" want {on=1; next} on && /^```/ {exit} on' "$readme"; }
block xml | sed "/<artifactId>dbfork-junit<\/artifactId>/{n;s/<version>.*<\/version>/<version>$VERSION<\/version>/}" > "$proj/pom.xml"
block java > "$proj/src/test/java/com/example/NotesTest.java"
block properties > "$proj/src/test/resources/junit-platform.properties"
grep -q "<version>$VERSION</version>" "$proj/pom.xml" || fail "the README's pom names no dbfork-junit version"
write_recipe "$proj"
chown -R 65534:65534 "$h"
# Java takes user.home from the account (nobody's is /nonexistent), not
# from HOME: a real user's account names its home, this one is told.
user_mvn() { IN="$proj" as_user "$h" env JAVA_TOOL_OPTIONS="-Duser.home=$h" mvn "$@"; }
out="$(user_mvn -B -ntp -Dmaven.repo.local="$m2" test 2>&1)" || fail "mvn test of the README's project: $(tail -40 <<<"$out")"
grep -q "Tests run: 2, Failures: 0, Errors: 0, Skipped: 0" <<<"$out" || fail "the README's project ran: $(tail -40 <<<"$out")"
bin="$(ls "$h"/.cache/dbfork/bin/*/dbfork)" || fail "dbfork-junit unpacked no binary into the user's ~/.cache"
as_user "$h" "$bin" version | grep -qF "dbfork $VERSION " || fail "the unpacked binary is not version $VERSION"
as_user "$h" "$bin" daemon stop >/dev/null 2>&1 || true
# A cached binary that was changed is replaced, never run: the next run
# checks it against the artifact's sha256 and unpacks it again.
want="$(sha256sum < "$bin")"
printf x >> "$bin"
out="$(user_mvn -B -o -ntp -Dmaven.repo.local="$m2" test 2>&1)" || fail "mvn test after the cached binary changed: $(tail -40 <<<"$out")"
[ "$(sha256sum < "$bin")" = "$want" ] || fail "dbfork-junit ran a cached binary that was changed"
ls -d "$h"/.local/share/dbfork >/dev/null || fail "the user's store is not in its XDG_DATA_HOME"
