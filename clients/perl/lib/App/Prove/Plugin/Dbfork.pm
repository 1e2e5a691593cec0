package App::Prove::Plugin::Dbfork;
# prove -j4 -PDbfork=path/to/dbfork.toml t/
#
# Every test process gets its own fresh, pre-seeded database from the
# store's `dbfork serve` (started on demand: `dbfork daemon start`), in PERL_TEST_DBFORK_DSN (+ _USER, _PASSWORD) and
# DATABASE_URL, like App::Prove::Plugin::MySQLPool did. Each lease ends
# with its test process. Options after the recipe: store=DIR, backend=B
# (they beat DBFORK_STORE and DBFORK_BACKEND). With no recipe given:
# $DBFORK_RECIPE, else ./dbfork.toml.
#   prove -PDbfork=dbfork.toml,store=/var/lib/dbfork t/
use strict;
use warnings;
use Cwd ();
use File::Basename ();
use File::Spec ();
use Test::Dbfork::Client;

our $VERSION = '0.1.0';

sub load {
    my ( $class, $p ) = @_;
    my @args   = @{ $p->{args} || [] };
    # The recipe: the plugin's argument, else $DBFORK_RECIPE, else
    # ./dbfork.toml (docs/api.md, "The client contract").
    my $recipe = shift(@args) || $ENV{DBFORK_RECIPE} || 'dbfork.toml';
    for my $a (@args) {
        my ( $k, $v ) = split /=/, $a, 2;
        if    ( $k eq 'store' )   { $ENV{DBFORK_STORE}   = Cwd::abs_path($v) }
        elsif ( $k eq 'backend' ) { $ENV{DBFORK_BACKEND} = $v }
        else  { die "App::Prove::Plugin::Dbfork: unknown option '$a' (use store=DIR, backend=NAME)\n" }
    }
    -f $recipe or die "App::Prove::Plugin::Dbfork: recipe $recipe not found (prove -PDbfork=path/to/dbfork.toml)\n";
    $ENV{DBFORK_RECIPE} = Cwd::abs_path($recipe);
    # Find (or start) the daemon once; test processes inherit its socket.
    $ENV{DBFORK_SOCKET} = Test::Dbfork::Client->find_socket( store => $ENV{DBFORK_STORE} );
    my $client = Test::Dbfork::Client->new( socket => $ENV{DBFORK_SOCKET} );
    eval { $client->health; 1 } or die $@;
    # Warm the golden now, once, rather than in the first test processes.
    $client->call( POST => '/v1/goldens', { recipe => $ENV{DBFORK_RECIPE}, env => {%ENV} } );
    # Test processes find Test::Dbfork where this plugin came from.
    my $lib = Cwd::abs_path( File::Spec->catdir( File::Basename::dirname( $INC{'App/Prove/Plugin/Dbfork.pm'} ), '..', '..', '..' ) );
    $ENV{PERL5LIB} = join ':', grep { defined && length } $lib, $ENV{PERL5LIB};
    $ENV{PERL5OPT} = join ' ', grep { defined && length } $ENV{PERL5OPT}, '-MTest::Dbfork';
    delete $ENV{PERL_TEST_DBFORK_DSN};
    return 1;
}

1;
