# Test::Dbfork->fresh inside a real `prove -PDbfork=...` run: every call
# gives the golden's rows only, by reset (PostgreSQL 15) or by a database
# cloned inside the server (PostgreSQL 18 on the store's own XFS image),
# and says which. Needs root, PostgreSQL, DBD::Pg, mvn (or a filled engine
# cache) and bin/dbfork (or DBFORK_BIN).
use strict;
use warnings;
use Test::More;
use File::Temp ();
use File::Path ();
use FindBin;
use Cwd ();
use JSON::PP ();

plan skip_all => 'needs root: dbfork runs servers as its system user (CI runs as root)' if $> != 0;
eval { require DBD::Pg; 1 } or BAIL_OUT("DBD::Pg missing: apt-get install libdbd-pg-perl");

my $repo = Cwd::abs_path("$FindBin::Bin/../../..");
my $lib  = "$repo/clients/perl/lib";
my $bin  = $ENV{DBFORK_BIN} || "$repo/bin/dbfork";
unless ( -x $bin ) { system( 'go', 'build', '-o', $bin, "$repo/cmd/dbfork" ) == 0 or BAIL_OUT("cannot build dbfork") }

sub write_file { my ( $p, $c ) = @_; open my $fh, '>', $p or die "$p: $!"; print $fh $c; close $fh }
sub slurp      { my ($p) = @_; open my $fh, '<', $p or return ''; local $/; <$fh> }

for my $case ( [ reset => '', 'plain' ], [ database => qq{version = "18"\n}, '' ] ) {
    my ( $want, $head, $storefs ) = @$case;
    my $root = File::Temp::tempdir( 'dbfork-fresh-XXXX', TMPDIR => 1 );
    chmod 0755, $root;
    my $store = "$root/store";
    mkdir "$root/proj";
    mkdir "$root/suite";
    write_file( "$root/proj/dbfork.toml", $head . qq{engine = "postgres"\ndatabase = "app"\n[[load]]\nsql = ["seed.sql"]\n[pool]\nmin = 1\nmax = 2\n} );
    write_file( "$root/proj/seed.sql", "create table notes(id serial primary key, who text not null);\ninsert into notes(who) values ('golden');\n" );
    write_file( "$root/suite/fresh.t", <<"T" );
use strict; use warnings; use Test::More;
use DBI;
use Test::Dbfork;
# The app's own handle, made when its module loads (the usual pattern),
# before any fresh call; it writes into the lease's own database.
my \$app = DBI->connect(\$ENV{PERL_TEST_DBFORK_DSN}, \$ENV{PERL_TEST_DBFORK_USER}, \$ENV{PERL_TEST_DBFORK_PASSWORD}, {RaiseError => 1, PrintError => 0});
\$app->do("insert into notes(who) values ('module')");
for my \$n (1 .. 3) {
    my \$db = Test::Dbfork->fresh;
    is \$db->mode, '$want', "mode \$n";
    is \$ENV{PERL_TEST_DBFORK_DSN}, \$db->dsn, 'environment points at it';
    my \$dbh = DBI->connect(\$db->dsn, \$db->user, \$db->password, {RaiseError => 1, PrintError => 0});
    is_deeply \$dbh->selectcol_arrayref('select who from notes order by id'), ['golden'], "golden rows only (\$n)";
    \$dbh->do("insert into notes(who) values ('t\$n')");
    \$dbh->disconnect;
    if (\$n == 1) {
        # Freshness is never lost silently: the handle from before the
        # call fails instead of showing the lease's written rows.
        my \$rows = eval { \$app->selectcol_arrayref('select who from notes order by id') };
        ok !defined \$rows, 'a handle made before the fresh call fails loudly' or diag explain \$rows;
    }
}
done_testing;
T
    local $ENV{DBFORK_BIN}          = $bin;
    local $ENV{DBFORK_DAEMON_IDLE}  = '2s';
    local $ENV{DBFORK_STORE_FS}     = $storefs;
    local $ENV{DBFORK_ENGINE_CACHE} = '/var/cache/dbfork-ci/engines';
    local $ENV{PERL5LIB}            = join ':', grep { defined && length } $lib, $ENV{PERL5LIB};
    delete local $ENV{DBFORK_SOCKET};
    delete local $ENV{DBFORK_STORE};
    my $out = `cd $root/suite && prove -v -PDbfork=$root/proj/dbfork.toml,store=$store . 2>&1`;
    is $?, 0, "$want: prove passes" or diag $out;
    like $out, qr/Tests=10/, "$want: all ran";
    # The daemon leaves by itself, with every server it ran.
    for ( 1 .. 1200 ) {
        last unless grep { index( slurp("$_/cmdline"), $store ) >= 0 } glob '/proc/[0-9]*';
        select undef, undef, undef, 0.1;
    }
    local $ENV{DBFORK_STORE_FS} = 'plain';
    my $ls = JSON::PP->new->decode( scalar `$bin --store $store ls --json` );
    is scalar( @{ $ls->{instances} || [] } ), 0, "$want: no instance left";
    system $bin, '--store', $store, 'gc', '--all';
    system "umount '$store' 2>/dev/null";    # its own XFS image, or a plain store's nosuid bind
    File::Path::remove_tree($root);
}
done_testing;
