# scripts/test-install.sh: the release's module proxy directory in front,
# a fresh GOPATH and module cache (root's module cache behind it as a
# second, offline proxy for the dependencies):
#   go install github.com/dbfork/dbfork/cmd/dbfork@vVERSION
#   go get github.com/dbfork/dbfork/dbforktest@vVERSION
# then a fresh module's test gets a seeded database from dbforktest.New
# through the installed binary. As root (dbforktest's servers need no
# more; the point is the module path).
h="$WORK/h-go"
proj="$h/proj"
mkdir -p "$proj"
write_recipe "$proj"
gomod="$(go env GOMODCACHE)"
goenv=(env -u DBFORK_BIN -u DBFORK_SOCKET -u GOFLAGS GOPATH="$h/go" GOMODCACHE="$h/go/pkg/mod" GOTOOLCHAIN=local
  GOPROXY="file://$OUT/goproxy,file://$gomod/cache/download" GONOSUMDB=github.com/dbfork GOSUMDB=off
  GOFLAGS=-mod=mod PATH="$h/go/bin:$(dirname "$(command -v go)"):/usr/bin:/bin"
  DBFORK_STORE="$h/store" DBFORK_STORE_FS=plain DBFORK_DAEMON_IDLE=2s)
out="$(cd "$proj" && "${goenv[@]}" go install "github.com/dbfork/dbfork/cmd/dbfork@v$VERSION" 2>&1)" || fail "go install …/cmd/dbfork@v$VERSION: $out"
"$h/go/bin/dbfork" version | grep -qF "dbfork v$VERSION " || fail "go install gave $("$h/go/bin/dbfork" version)"
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
(cd "$proj" && "${goenv[@]}" go mod init example.com/app >/dev/null 2>&1 &&
  "${goenv[@]}" go get "github.com/dbfork/dbfork/dbforktest@v$VERSION" >/dev/null 2>&1) || fail "go get …/dbforktest@v$VERSION"
out="$(cd "$proj" && "${goenv[@]}" go test -count=1 ./... 2>&1)" || fail "go test with dbforktest: $out"
"$h/go/bin/dbfork" --store "$h/store" daemon stop >/dev/null 2>&1 || true
"$h/go/bin/dbfork" --store "$h/store" gc --all >/dev/null
chmod -R u+w "$h/go"   # the module cache is read-only
