# Runs a real `prove -j4 -PDbfork=...` suite against a real `dbfork serve`:
# every test process gets its own database and never sees another's rows,
# and no lease or instance is left afterwards. Needs root, PostgreSQL,
# DBD::Pg and bin/dbfork (or DBFORK_BIN).
use strict;
use warnings;
use Test::More;
use File::Temp ();
use File::Path ();
use File::Spec;
use FindBin;
use lib "$FindBin::Bin/../lib";
use Cwd ();
use JSON::PP ();
use POSIX ();

plan skip_all => 'needs root: dbfork mounts overlays and runs servers as its system user (CI runs as root)' if $> != 0;
eval { require DBD::Pg; 1 } or BAIL_OUT("DBD::Pg missing: apt-get install libdbd-pg-perl");

my $repo = Cwd::abs_path("$FindBin::Bin/../../..");
my $lib  = "$repo/clients/perl/lib";
my $bin  = $ENV{DBFORK_BIN} || "$repo/bin/dbfork";
unless ( -x $bin ) { system( 'go', 'build', '-o', $bin, "$repo/cmd/dbfork" ) == 0 or BAIL_OUT("cannot build dbfork") }

my $root = File::Temp::tempdir( 'dbfork-prove-XXXX', TMPDIR => 1 );
chmod 0755, $root;
my $store = "$root/store";
mkdir "$root/proj";
mkdir "$root/suite";
write_file( "$root/proj/dbfork.toml", qq{engine = "postgres"\ndatabase = "app"\n[[load]]\nsql = ["seed.sql"]\n[pool]\nmin = 4\nmax = 8\n} );
write_file( "$root/proj/seed.sql", "create table notes(id serial primary key, who text not null);\ninsert into notes(who) values ('golden');\n" );

for my $n ( 1 .. 8 ) {
    write_file( "$root/suite/t$n.t", <<"T" );
use strict; use warnings; use Test::More;
use DBI;
ok \$ENV{PERL_TEST_DBFORK_DSN}, 'a DSN';
is \$ENV{DATABASE_URL} =~ m{^postgres://} ? 1 : 0, 1, 'DATABASE_URL';
my \$dbh = DBI->connect(\$ENV{PERL_TEST_DBFORK_DSN}, \$ENV{PERL_TEST_DBFORK_USER}, \$ENV{PERL_TEST_DBFORK_PASSWORD}, {RaiseError => 1, PrintError => 0});
\$dbh->do("insert into notes(who) values ('t$n')");
select undef, undef, undef, 0.2;   # overlap with the other processes
my \$rows = \$dbh->selectcol_arrayref('select who from notes order by id');
is_deeply \$rows, ['golden', 't$n'], 'only the golden row and ours';
open my \$fh, '>>', '$root/ids' or die; print \$fh "\$ENV{DBFORK_INSTANCE}\\n"; close \$fh;
done_testing;
T
}

# No daemon is started here: the plugin starts one on demand (on the
# store's own XFS image, as a new user's store would be), and it leaves by
# itself once prove is done.
local $ENV{DBFORK_BIN}         = $bin;
local $ENV{DBFORK_DAEMON_IDLE} = '2s';
delete $ENV{DBFORK_SOCKET};
local $ENV{PERL5LIB} = join ':', grep { defined && length } $lib, $ENV{PERL5LIB};
local $ENV{DBFORK_STORE};
delete $ENV{DBFORK_STORE};
my $out = `cd $root/suite && prove -j4 -PDbfork=$root/proj/dbfork.toml,store=$store . 2>&1`;
is $?, 0, 'prove -j4 passes' or diag $out;
like $out, qr/Files=8, Tests=24/, 'all 8 files ran';

my @ids = split /\n/, slurp("$root/ids");
is scalar(@ids), 8, 'eight test processes';
my %uniq = map { $_ => 1 } @ids;
is scalar( keys %uniq ), 8, 'each had its own instance';

require Test::Dbfork::Client;
my $leases = Test::Dbfork::Client->new( store => $store )->leases;
is scalar(@$leases), 0, 'every lease released when prove ended';
my @started = slurp("$store/logs/serve.log") =~ /listening on/g;
is scalar(@started), 1, 'one daemon served every test process';

# No daemon can be had (dbfork refuses a store others may write): a clear
# error, not a hang.
mkdir "$root/open";
chmod 0777, "$root/open";
my $bad = `cd $root/suite && prove -PDbfork=$root/proj/dbfork.toml,store=$root/open/store . 2>&1`;
isnt $?, 0, 'prove fails without a daemon';
like $bad, qr/writable by group or others/, 'and says why';

# The daemon leaves by itself, with every server it ran.
my $gone = 0;
for ( 1 .. 1200 ) {
    if ( !servers_of($store) ) { $gone = 1; last }
    select undef, undef, undef, 0.1;
}
ok $gone, 'the idle daemon left with its servers';
local $ENV{DBFORK_STORE_FS} = 'plain';
my $ls = JSON::PP->new->decode( scalar `$bin --store $store ls --json` );
is scalar( @{ $ls->{instances} || [] } ), 0, 'no instance left' or diag explain $ls;

system $bin, '--store', $store, 'gc', '--all';
system 'umount', $store;    # its own XFS image
File::Path::remove_tree($root);
done_testing;

sub write_file { my ( $p, $c ) = @_; open my $fh, '>', $p or die "$p: $!"; print $fh $c; close $fh }
sub servers_of {
    my ($dir) = @_;
    my @pids;
    for my $p ( glob '/proc/[0-9]*' ) {
        open my $fh, '<', "$p/cmdline" or next;
        local $/;
        my $c = <$fh> // '';
        push @pids, $p if index( $c, $dir ) >= 0;
    }
    return @pids;
}
sub slurp { my ($p) = @_; open my $fh, '<', $p or return ''; local $/; <$fh> }
