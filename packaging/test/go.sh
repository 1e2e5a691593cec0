# scripts/test-install.sh: the release's module proxy directory in front,
# a fresh GOPATH and module cache (a copy of root's downloaded modules
# behind it as a second, offline proxy for the dependencies):
#   go install github.com/dbfork/dbfork/cmd/dbfork@vVERSION
#   go get github.com/dbfork/dbfork/dbforktest@vVERSION
# then a fresh module's test gets a seeded database from dbforktest.New
# through the installed binary. As nobody, with GOPATH, the module cache,
# the build cache and the store in that user's HOME (the downloaded
# modules are copied: the user is given nothing of root's).
h="$(new_home h-go)"
proj="$h/proj"
mkdir -p "$proj" "$h/deps"
write_recipe "$proj"
cp -a "$(go env GOMODCACHE)/cache/download/." "$h/deps/"
chown -R 65534:65534 "$h"
goenv=(env GOPATH="$h/go" GOMODCACHE="$h/go/pkg/mod" GOCACHE="$h/.cache/go-build" GOTOOLCHAIN=local
  GOPROXY="file://$OUT/goproxy,file://$h/deps" GONOSUMDB=github.com/dbfork GOSUMDB=off GOFLAGS=-mod=mod
  PATH="$h/go/bin:$(dirname "$(command -v go)"):/usr/bin:/bin")
out="$(IN="$proj" as_user "$h" "${goenv[@]}" go install "github.com/dbfork/dbfork/cmd/dbfork@v$VERSION" 2>&1)" || fail "go install …/cmd/dbfork@v$VERSION: $out"
as_user "$h" "$h/go/bin/dbfork" version | grep -qF "dbfork v$VERSION " || fail "go install gave $(as_user "$h" "$h/go/bin/dbfork" version 2>&1)"
cat > "$proj/notes_test.go" <<'GO'
package app

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/dbforktest"
)

func TestSeeded(t *testing.T) {
	dsn := dbforktest.New(t, "dbfork.toml")
	out, err := exec.Command("psql", dsn, "-tAc", "select count(*) from notes").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Fatalf("psql: %v %s", err, out)
	}
}
GO
chown 65534:65534 "$proj/notes_test.go"
out="$(IN="$proj" as_user "$h" sh -c '"$@" go mod init example.com/app && "$@" go get "github.com/dbfork/dbfork/dbforktest@v'"$VERSION"'"' \
  sh "${goenv[@]}" 2>&1)" || fail "go get …/dbforktest@v$VERSION: $out"
out="$(IN="$proj" as_user "$h" "${goenv[@]}" go test -count=1 ./... 2>&1)" || fail "go test with dbforktest: $out"
ls -d "$h"/.local/share/dbfork >/dev/null || fail "the user's store is not in its XDG_DATA_HOME"
chmod -R u+w "$h/go"   # the module cache is read-only
