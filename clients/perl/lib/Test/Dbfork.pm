package Test::Dbfork;
# Gives this test process its own fresh database from `dbfork serve`.
#
# Loaded into every test by `prove -PDbfork=dbfork.toml` (through
# PERL5OPT), or by hand with `use Test::Dbfork;` and DBFORK_RECIPE set. On
# load it leases a warm clone and exports:
#
#   PERL_TEST_DBFORK_DSN       a DBI DSN (dbi:Pg:... or dbi:MariaDB:...)
#   PERL_TEST_DBFORK_USER      and _PASSWORD, for DBI->connect
#   DATABASE_URL               the URL form
#   PG* or MYSQL_*             the engine's client variables
#   DBFORK_INSTANCE            the instance id
#
# The lease is released when the process ends; if it dies, the daemon
# reclaims it by itself. Child processes share their parent's database.
# Test::Dbfork->fresh gives the golden's data again within the process
# (Test::Dbfork::Fresh: a database cloned in the server, or a reset).
use strict;
use warnings;
use Test::Dbfork::Client;

our $VERSION = '0.1.0';
our $LEASE;
my $OWNER_PID;

sub dbi_dsn {
    my ($l) = @_;
    my %e = %{ $l->{env} || {} };
    if ( $l->{engine} eq 'postgres' ) {
        return "dbi:Pg:dbname=$e{PGDATABASE};host=$e{PGHOST};port=$e{PGPORT}", $e{PGUSER}, $e{PGPASSWORD};
    }
    my $driver = eval { require DBD::MariaDB; 1 } ? 'MariaDB' : 'mysql';
    return "dbi:$driver:database=$e{MYSQL_DATABASE};host=$e{MYSQL_HOST};port=$e{MYSQL_PORT}", $e{MYSQL_USER}, $e{MYSQL_PWD};
}

sub import {
    return if $ENV{PERL_TEST_DBFORK_DSN} || $LEASE;    # a child: use the parent's database
    my $recipe = $ENV{DBFORK_RECIPE} || ( -f 'dbfork.toml' ? 'dbfork.toml' : undef )
      or die "Test::Dbfork: set DBFORK_RECIPE to your dbfork.toml (prove -PDbfork=dbfork.toml does)\n";
    my $client = Test::Dbfork::Client->new( socket => Test::Dbfork::Client->find_socket( store => $ENV{DBFORK_STORE} ) );
    my %o;
    $o{backend} = $ENV{DBFORK_BACKEND} if $ENV{DBFORK_BACKEND};
    $LEASE     = $client->acquire( $recipe, %o );
    $OWNER_PID = $$;
    my ( $dsn, $user, $password ) = dbi_dsn($LEASE);
    $ENV{$_} = $LEASE->{env}{$_} for keys %{ $LEASE->{env} };
    $ENV{PERL_TEST_DBFORK_DSN}      = $dsn;
    $ENV{PERL_TEST_DBFORK_USER}     = $user;
    $ENV{PERL_TEST_DBFORK_PASSWORD} = defined $password ? $password : '';
    return;
}

sub fresh {
    require Test::Dbfork::Fresh;
    return Test::Dbfork::Fresh->new;
}

# keep_failed: DBFORK_KEEP_FAILED set to anything but the empty string
# (docs/api.md, "The client contract").
sub keep_failed { my $k = $ENV{DBFORK_KEEP_FAILED}; return defined $k && $k ne '' }

# A failed test file's lease is kept with DBFORK_KEEP_FAILED (`dbfork
# down ID` later), else released.
END {
    if ( $LEASE && defined $OWNER_PID && $OWNER_PID == $$ ) {
        local $@;
        my $failed = ( $? != 0 ) || ( $INC{'Test/Builder.pm'} && !Test::Builder->new->is_passing );
        eval {
            my $c = Test::Dbfork::Client->new( socket => $ENV{DBFORK_SOCKET} || Test::Dbfork::Client->find_socket( store => $ENV{DBFORK_STORE} ) );
            if ( $failed && keep_failed() ) {
                $c->keep( $LEASE->{id} );
                print STDERR "# dbfork: kept instance $LEASE->{id} of a failed test: $LEASE->{dsn} (dbfork down $LEASE->{id} when done)\n";
            }
            else { $c->release( $LEASE->{id} ) }
        };
    }
}

1;
