package Test::Dbfork::Fresh;
# The golden's data again, inside one test process, by the fastest mode
# the process's lease offers:
#
#   use Test::Dbfork;
#   for my $case (@cases) {
#       my $db = Test::Dbfork->fresh;    # or Test::Dbfork::Fresh->new
#       my $dbh = DBI->connect( $db->dsn, $db->user, $db->password );
#       ...                              # $db->mode: 'slot', 'database' or 'reset'
#   }                                    # a fresh database is dropped here
#
# The daemon picks the mode. Mode 'slot' (a golden built with [fresh]
# slots): the next unused copy of the database made at build time.
# Mode 'database' (PostgreSQL 18 on a store that shares extents): a new
# database cloned inside the running server, dropped when $db goes out of
# scope. Mode 'reset': the process's instance is reset in place (same
# DSN; its open connections break). Either way the environment
# (PERL_TEST_DBFORK_DSN, DATABASE_URL, PG*) points at the fresh data while
# $db lives.
use strict;
use warnings;
use Test::Dbfork::Client;

our $VERSION = '0.1.0';

sub new {
    my ($class) = @_;
    my $lease = do { no warnings "once"; $Test::Dbfork::LEASE }
      or die "Test::Dbfork->fresh: this process holds no lease (run under prove -PDbfork=dbfork.toml, or `use Test::Dbfork` with DBFORK_RECIPE set)\n";
    my $client = Test::Dbfork::Client->new( socket => $ENV{DBFORK_SOCKET} || Test::Dbfork::Client->find_socket( store => $ENV{DBFORK_STORE} ) );
    my $self = bless { client => $client, lease => $lease, pid => $$, saved => {} }, $class;
    # The daemon decides how (POST /v1/leases/{id}/fresh); an untouched
    # lease ("none") is the golden's data already, as after a reset.
    my $f   = $client->fresh( $lease->{id} );
    my $env = $f->{env};
    $self->{mode} = $f->{mode} eq 'none' ? 'reset' : $f->{mode};
    $self->{name} = $f->{name} if $self->{mode} eq 'database' || $self->{mode} eq 'slot';
    my ( $dsn, $user, $password ) = Test::Dbfork::dbi_dsn( { engine => $lease->{engine}, env => $env } );
    my %set = ( %$env, PERL_TEST_DBFORK_DSN => $dsn, PERL_TEST_DBFORK_USER => $user,
        PERL_TEST_DBFORK_PASSWORD => defined $password ? $password : '' );
    for my $k ( keys %set ) {
        $self->{saved}{$k} = $ENV{$k};
        $ENV{$k} = $set{$k};
    }
    @$self{qw(dsn user password url)} = ( $dsn, $user, $set{PERL_TEST_DBFORK_PASSWORD}, $env->{DATABASE_URL} );
    return $self;
}

sub mode     { $_[0]{mode} }
sub dsn      { $_[0]{dsn} }
sub user     { $_[0]{user} }
sub password { $_[0]{password} }
sub url      { $_[0]{url} }
sub name     { $_[0]{name} }

# done: drop a fresh database now and point the environment back at the
# lease (also what going out of scope does).
sub done {
    my ($self) = @_;
    return if $self->{done}++ || $self->{pid} != $$;
    for my $k ( keys %{ $self->{saved} } ) {
        if   ( defined $self->{saved}{$k} ) { $ENV{$k} = $self->{saved}{$k} }
        else                                { delete $ENV{$k} }
    }
    if ( $self->{mode} eq 'database' ) {
        local $@;
        eval { $self->{client}->drop_database( $self->{lease}{id}, $self->{name} ) };    # an ended lease took it along
    }
    return;
}

sub DESTROY { $_[0]->done }

1;
