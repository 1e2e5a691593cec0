# scripts/test-install.sh: the Test-Dbfork distribution built, tested and
# installed the CPAN way (perl Makefile.PL && make && make test && make
# install) by a fresh user into ~/perl5, with dbfork installed by another
# route (here: the release binary in ~/bin, as `go install` or the .deb
# would put one on PATH); then `prove -PDbfork` runs two test processes
# that each get the golden's seed.
h="$(new_home h-perl)"
mkdir -p "$h/bin" "$h/proj/t"
install -m 755 "$OUT/dbfork-linux-$ARCH" "$h/bin/dbfork"
tar xzf "$OUT/perl/Test-Dbfork-$VERSION.tar.gz" -C "$h"
write_recipe "$h/proj"
for n in 1 2; do
  cat > "$h/proj/t/notes$n.t" <<'T'
use strict;
use warnings;
use Test::More;
use DBI;
my $dbh = DBI->connect( $ENV{PERL_TEST_DBFORK_DSN}, $ENV{PERL_TEST_DBFORK_USER}, $ENV{PERL_TEST_DBFORK_PASSWORD}, { RaiseError => 1 } );
is( $dbh->selectrow_array('select count(*) from notes'), 1, 'the seed, and no other test process rows' );
$dbh->do("insert into notes(who) values ('perl')");
done_testing;
T
done
chown -R 65534:65534 "$h"
IN="$h/Test-Dbfork-$VERSION" as_user "$h" sh -c "perl Makefile.PL INSTALL_BASE=$h/perl5 >/dev/null && make >/dev/null &&
  make test >/dev/null && make install >/dev/null" || fail "perl Makefile.PL && make && make test && make install"
out="$(IN="$h/proj" as_user "$h" env PERL5LIB="$h/perl5/lib/perl5" prove -j2 -PDbfork=dbfork.toml t/ 2>&1)" ||
  fail "prove -PDbfork with the installed distribution: $out"
grep -q "^Result: PASS" <<<"$out" || fail "prove -PDbfork: $out"
