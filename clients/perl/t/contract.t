# The client contract (docs/api.md, "The client contract";
# clients/contract.json) checked against the prove plugin and Test::Dbfork
# with a real `dbfork serve`: every case of the shared file, keep-failed,
# and the mode names Test::Dbfork->fresh reports. Needs root, PostgreSQL
# and bin/dbfork (or DBFORK_BIN).
use strict;
use warnings;
use Test::More;
use File::Temp ();
use File::Path ();
use FindBin;
use Cwd ();
use JSON::PP ();

plan skip_all => 'needs root: dbfork mounts overlays and runs servers as its system user (CI runs as root)' if $> != 0;

my $repo = Cwd::abs_path("$FindBin::Bin/../../..");
my $lib  = "$repo/clients/perl/lib";
my $bin  = $ENV{DBFORK_BIN} || "$repo/bin/dbfork";
unless ( -x $bin ) { system( 'go', 'build', '-o', $bin, "$repo/cmd/dbfork" ) == 0 or BAIL_OUT("cannot build dbfork") }

sub write_file { my ( $p, $c ) = @_; open my $fh, '>', $p or die "$p: $!"; print $fh $c; close $fh }
sub slurp      { my ($p) = @_; open my $fh, '<', $p or return ''; local $/; <$fh> }
my $json     = JSON::PP->new;
my $contract = $json->decode( slurp("$repo/clients/contract.json") );

my $root = File::Temp::tempdir( 'dbfork-contract-XXXX', TMPDIR => 1 );
chmod 0755, $root;
my $store = "$root/store";
mkdir "$root/$_" for qw(proj suite);
write_file( "$root/proj/dbfork.toml", qq{engine = "postgres"\ndatabase = "app"\n[[load]]\nsql = ["seed.sql"]\n[pool]\nmin = 1\nmax = 4\n} );
write_file( "$root/proj/seed.sql", "create table notes(id serial primary key, who text not null);\ninsert into notes(who) values ('golden');\n" );
write_file( "$root/suite/contract.t", <<"T" );
use strict; use warnings; use Test::More;
use JSON::PP ();
my \@modes = map { Test::Dbfork->fresh->mode } 1 .. 2;
open my \$fh, '>', '$root/out' or die; print \$fh JSON::PP->new->encode({ id => \$Test::Dbfork::LEASE->{id}, backend => \$Test::Dbfork::LEASE->{backend}, modes => \\\@modes }); close \$fh;
ok !\$ENV{DBFORK_CONTRACT_FAIL}, 'fails when asked to';
done_testing;
T

my %value = ( '@recipe' => "$root/proj/dbfork.toml", '@missing' => "$root/missing/dbfork.toml" );

# run: one prove of the suite; the options go into -PDbfork=..., env on top
# of a clean environment. Returns prove's output and what the test recorded.
sub run {
    my ( $opt, $env ) = @_;
    unlink "$root/out";
    my @p = ( $opt->{recipe} // '' );
    push @p, "backend=$opt->{backend}" if $opt->{backend};
    my $plugin = ( grep { length } @p ) ? '=' . join( ',', @p ) : '';
    local %ENV = %ENV;
    delete @ENV{qw(DBFORK_SOCKET DBFORK_RECIPE DBFORK_BACKEND DBFORK_KEEP_FAILED PERL_TEST_DBFORK_DSN)};
    @ENV{qw(DBFORK_BIN DBFORK_STORE DBFORK_STORE_FS DBFORK_DAEMON_IDLE)} = ( $bin, $store, 'plain', '2s' );
    $ENV{PERL5LIB} = join ':', grep { defined && length } $lib, $ENV{PERL5LIB};
    @ENV{ keys %$env } = values %$env;
    my $out = `cd $root/suite && prove -v -PDbfork$plugin contract.t 2>&1`;
    my $rc  = $?;
    my $rec = -f "$root/out" ? $json->decode( slurp("$root/out") ) : {};
    return ( $rc, $out, $rec );
}

sub instances {
    local $ENV{DBFORK_STORE_FS} = 'plain';
    return @{ $json->decode( scalar `$bin --store $store ls --json` )->{instances} || [] };
}

sub wait_daemon_gone {
    for ( 1 .. 1200 ) {
        return unless grep { index( slurp("$_/cmdline"), $store ) >= 0 } glob '/proc/[0-9]*';
        select undef, undef, undef, 0.1;
    }
}

my %allowed = map { $_ => 1 } @{ $contract->{fresh_modes} };
for my $case ( @{ $contract->{cases} } ) {
    my %env = map { $_ => $value{ $case->{env}{$_} } // $case->{env}{$_} } keys %{ $case->{env} || {} };
    my %opt = map { $_ => $value{ $case->{option}{$_} } // $case->{option}{$_} } keys %{ $case->{option} || {} };
    $opt{recipe} //= $value{'@recipe'} unless $env{DBFORK_RECIPE};
    my ( $rc, $out, $rec ) = run( \%opt, \%env );
    is $rc, 0, "$case->{name}: prove passes" or diag $out;
    ok $rec->{id}, "$case->{name}: leased" or diag $out;
    is $rec->{backend}, $case->{want}{backend}, "$case->{name}: backend" if $case->{want}{backend};
    my @bad = grep { !$allowed{$_} } @{ $rec->{modes} || [] };
    ok( @{ $rec->{modes} || [] } && !@bad, "$case->{name}: fresh modes are the contract's" ) or diag explain $rec;
}

# Keep-failed: the failed file's instance runs on, and is named.
ok exists $contract->{variables}{DBFORK_KEEP_FAILED}, 'the contract names DBFORK_KEEP_FAILED';
my ( $rc, $out, $rec ) = run( { recipe => $value{'@recipe'} }, { DBFORK_CONTRACT_FAIL => 1, DBFORK_KEEP_FAILED => 1 } );
isnt $rc, 0, 'keep-failed: the file fails';
like $out, qr/kept instance \Q$rec->{id}\E/, 'keep-failed: says which instance it kept';
my ($kept) = grep { $_->{id} eq ( $rec->{id} // '' ) } instances();
is $kept && $kept->{status}, 'ready', 'keep-failed: the instance runs on' or diag explain [ instances() ];
{ local $ENV{DBFORK_STORE_FS} = 'plain'; system $bin, '--store', $store, 'down', $rec->{id} if $rec->{id} }

# Without it the failed file's lease is released like any other.
( $rc, $out, $rec ) = run( { recipe => $value{'@recipe'} }, { DBFORK_CONTRACT_FAIL => 1 } );
isnt $rc, 0, 'no keep-failed: the file fails';
unlike $out, qr/kept instance/, 'no keep-failed: nothing kept';
wait_daemon_gone();
ok !( grep { $_->{id} eq ( $rec->{id} // '' ) } instances() ), 'no keep-failed: the instance is gone';

wait_daemon_gone();
{
    local $ENV{DBFORK_STORE_FS} = 'plain';
    system $bin, '--store', $store, 'gc', '--all';
}
is scalar( instances() ), 0, 'no instance left';
system "umount '$store' 2>/dev/null";    # a plain store's nosuid bind
File::Path::remove_tree($root);
done_testing;
