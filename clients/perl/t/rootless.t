# Issue 18 as its reporter checks it, for prove: an ordinary user (no sudo,
# no store configured, home on ext4) runs `prove -j4 -PDbfork=...`. The
# plugin starts the user's own daemon on the default store in their home;
# clones are OverlayFS mounts inside each server's own user namespace; every
# test process gets its own database; afterwards no daemon, server or mount
# (in any namespace) is left. Runs as root only to create and drop the user's
# world; everything under test runs as `nobody`.
use strict;
use warnings;
use Test::More;
use File::Temp ();
use File::Path ();
use File::Copy ();
use FindBin;
use Cwd ();
use JSON::PP ();

plan skip_all => 'needs root to run the suite as another user (CI runs as root)' if $> != 0;
eval { require DBD::Pg; 1 } or BAIL_OUT("DBD::Pg missing: apt-get install libdbd-pg-perl");

my $repo = Cwd::abs_path("$FindBin::Bin/../../..");
my $bin  = $ENV{DBFORK_BIN} || "$repo/bin/dbfork";
unless ( -x $bin ) { system( 'go', 'build', '-o', $bin, "$repo/cmd/dbfork" ) == 0 or BAIL_OUT("cannot build dbfork") }
my ( $uid, $gid ) = ( getpwnam 'nobody' )[ 2, 3 ];

my $root = File::Temp::tempdir( 'dbfork-rootless-XXXX', TMPDIR => 1 );
chmod 0755, $root;
my $home  = "$root/home";
my $store = "$home/.local/share/dbfork";    # the user's default store
File::Path::make_path( "$home/bin", "$home/proj", "$home/suite", "$home/out" );
File::Copy::copy( $bin, "$home/bin/dbfork" ) or die "copy: $!";
chmod 0755, "$home/bin/dbfork";
system( 'cp', '-r', "$repo/clients/perl/lib", "$home/lib" ) == 0 or die "cp lib";
write_file( "$home/proj/dbfork.toml", qq{engine = "postgres"\ndatabase = "app"\n[[load]]\nsql = ["seed.sql"]\n[pool]\nmin = 4\nmax = 8\n} );
write_file( "$home/proj/seed.sql", "create table notes(id serial primary key, who text not null);\ninsert into notes(who) values ('golden');\n" );
for my $n ( 1 .. 8 ) {
    write_file( "$home/suite/t$n.t", <<"T" );
use strict; use warnings; use Test::More;
use DBI;
use Test::Dbfork::Client;
my \$dbh = DBI->connect(\$ENV{PERL_TEST_DBFORK_DSN}, \$ENV{PERL_TEST_DBFORK_USER}, \$ENV{PERL_TEST_DBFORK_PASSWORD}, {RaiseError => 1, PrintError => 0});
\$dbh->do("insert into notes(who) values ('t$n')");
select undef, undef, undef, 0.2;   # overlap with the other processes
is_deeply \$dbh->selectcol_arrayref('select who from notes order by id'), ['golden', 't$n'], 'only the golden row and ours';
my (\$me) = grep { \$_->{id} eq \$ENV{DBFORK_INSTANCE} } \@{ Test::Dbfork::Client->new(socket => \$ENV{DBFORK_SOCKET})->leases };
is \$me->{backend}, 'userns-overlay', 'an OverlayFS clone in its own namespace';
open my \$fh, '>>', '$home/out/ids' or die; print \$fh "\$ENV{DBFORK_INSTANCE} \$ENV{DBFORK_SOCKET}\\n"; close \$fh;
done_testing;
T
}
system( 'chown', '-R', "$uid:$gid", $home ) == 0 or die 'chown';

# As the user, with nothing but their PATH, HOME and PERL5LIB.
my @as = ( 'setpriv', "--reuid=$uid", "--regid=$gid", '--clear-groups', 'env', '-i',
    "PATH=$home/bin:/usr/local/bin:/usr/bin:/bin", "HOME=$home", 'LANG=C', "PERL5LIB=$home/lib", 'DBFORK_DAEMON_IDLE=2s' );
my $out = qx{cd $home/suite && @as prove -j4 -PDbfork=../proj/dbfork.toml . 2>&1};
is $?, 0, 'prove -j4 passes as an ordinary user' or diag $out;
like $out, qr/Files=8, Tests=16/, 'all 8 files ran';

my @lines = split /\n/, slurp("$home/out/ids");
my %ids   = map { ( split / / )[0] => 1 } @lines;
my %socks = map { ( split / / )[1] => 1 } @lines;
is scalar( keys %ids ), 8, 'each test process had its own instance';
is_deeply [ keys %socks ], ["$store/dbfork.sock"], "one daemon, on the user's default store";
is( ( stat $store )[4], $uid, 'the store belongs to the user' );

# The daemon leaves once idle, with its servers, namespaces and mounts.
my $gone = 0;
for ( 1 .. 1200 ) {
    if ( !processes_under( $uid, $home ) && !mounts_under($store) ) { $gone = 1; last }
    select undef, undef, undef, 0.1;
}
ok $gone, 'nothing of the user is left running or mounted' or diag "processes: @{[processes_under($uid, $home)]}; mounts: @{[mounts_under($store)]}";
my $ls = JSON::PP->new->decode( scalar qx{cd $home && @as dbfork ls --json} );
is scalar( @{ $ls->{instances} || [] } ), 0, 'no instance left' or diag explain $ls;

system "cd $home && @as dbfork gc --all >/dev/null 2>&1";
File::Path::remove_tree($root);
done_testing;

sub write_file { my ( $p, $c ) = @_; open my $fh, '>', $p or die "$p: $!"; print $fh $c; close $fh }
sub slurp      { my ($p) = @_; open my $fh, '<', $p or return ''; local $/; <$fh> }

# PIDs of $u's processes whose program, working dir or command line lies
# under $dir (other suites may run as the same user meanwhile).
sub processes_under {
    my ( $u, $dir ) = @_;
    my @pids;
    for my $p ( glob '/proc/[0-9]*' ) {
        my @s = stat $p;
        next unless @s && $s[4] == $u;
        open my $fh, '<', "$p/cmdline" or next;
        my $c = do { local $/; <$fh> } // '';
        my @where = ( $c, grep { defined } map { readlink "$p/$_" } qw(exe cwd) );
        push @pids, $p if grep { index( $_, $dir ) >= 0 } @where;
    }
    return @pids;
}

# Mount points under $dir in any process's mount namespace.
sub mounts_under {
    my ($dir) = @_;
    my %seen;
    for my $p ( glob '/proc/[0-9]*' ) {
        open my $fh, '<', "$p/mountinfo" or next;
        while (<$fh>) {
            my $point = ( split / / )[4];
            $seen{$point} = 1 if $point eq $dir || index( $point, "$dir/" ) == 0;
        }
    }
    return sort keys %seen;
}
