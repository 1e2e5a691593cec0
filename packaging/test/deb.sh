# scripts/test-install.sh: `apt-get install ./dbfork_VERSION_ARCH.deb` on
# this machine puts dbfork in /usr/bin with its docs; a fresh user runs it
# from PATH; `apt-get remove` takes every file away again.
deb="$OUT/deb/dbfork_${VERSION}_$ARCH.deb"
if dpkg-query -W -f='${Status}' dbfork 2>/dev/null | grep -q "install ok installed"; then
  fail "a dbfork package is installed on this machine already: not touching it"
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$deb" >/dev/null 2>&1 ||
  fail "apt-get install $deb"
h="$(new_home h-deb)"
as_user "$h" dbfork version | grep -qF "dbfork $VERSION " || fail "dbfork from the .deb: $(as_user "$h" dbfork version 2>&1)"
[ "$(as_user "$h" sh -c 'command -v dbfork')" = /usr/bin/dbfork ] || fail "dbfork from the .deb is not /usr/bin/dbfork"
grep -q "dbfork version" /usr/share/doc/dbfork/commands.txt || fail "the .deb has no commands.txt with every command's help"
[ -f /usr/share/doc/dbfork/docs/api.md ] || fail "the .deb has no docs"
DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq dbfork >/dev/null 2>&1 || fail "apt-get remove dbfork"
[ ! -e /usr/bin/dbfork ] && [ ! -e /usr/share/doc/dbfork ] || fail "apt-get remove left files of dbfork"
