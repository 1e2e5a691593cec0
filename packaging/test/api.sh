# scripts/test-install.sh: every client refuses a daemon of another API
# version before its first request, with one line saying how to get rid of
# it. The daemon is a stand-in answering /v1/health as a dbfork from
# before API versions did (no "api"): pure client logic, so a fake is
# enough; the real /v1/health is checked by internal/api's tests.
sock="$WORK/old.sock"
python3 "$REPO/packaging/test/old-daemon.py" "$sock" &
PIDS+=($!)
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
want='speaks API version 0 (dbfork unknown) but'
c="$REPO/clients"
check_refused() { # NAME OUTPUT
  grep -q "$want" <<<"$2" && grep -q 'dbfork daemon stop' <<<"$2" || fail "$1 did not refuse the old daemon: $2"
}
check_refused python "$(cd "$c/python" && DBFORK_SOCKET="$sock" python3 -c \
  'from pytest_dbfork.client import Client; Client().acquire("dbfork.toml")' 2>&1)"
check_refused node "$(DBFORK_SOCKET="$sock" node -e \
  "const {Client}=require('$c/node/lib/client.cjs'); new Client(process.env.DBFORK_SOCKET).acquire('dbfork.toml').then(()=>console.log('accepted'), (e)=>console.log(e.message))" 2>&1)"
check_refused perl "$(DBFORK_SOCKET="$sock" perl -I"$c/perl/lib" -MTest::Dbfork::Client -e \
  'Test::Dbfork::Client->new->acquire("dbfork.toml")' 2>&1)"
mkdir -p "$WORK/api-java"
javac -d "$WORK/api-java" "$c"/java/src/main/java/io/dbfork/junit/{Client,Json,DbforkException,Lease}.java
check_refused java "$(java -cp "$WORK/api-java" "$REPO/packaging/test/OldDaemon.java" "$sock" 2>&1)"
