package Test::Dbfork::Client;
# A small client for the API of `dbfork serve` (HTTP/JSON on the unix
# socket STORE/dbfork.sock). Core Perl only. See docs/api.md.
use strict;
use warnings;
use IO::Socket::UNIX;
use JSON::PP ();
use Cwd ();

our $VERSION = '0.1.0';

# The API version this client speaks; /v1/health says the daemon's (its
# "api"), and a client refuses a daemon of another version up front.
our $API_VERSION = 1;

sub new {
    my ( $class, %o ) = @_;
    # Without a socket: the one rule of docs/api.md (which store is the
    # default is dbfork's to say, not this client's).
    return bless { socket => $o{socket} || $class->find_socket( store => $o{store} ) }, $class;
}

# find_socket(store => DIR): the API socket by the one rule of docs/api.md
# ("Finding the daemon"): $DBFORK_SOCKET as it is, else what
# `dbfork daemon start --json` prints; it starts a daemon for the store when
# none answers (the daemon leaves by itself when idle). Dies with dbfork's
# one-line reason.
sub find_socket {
    my ( $class, %o ) = @_;
    return $ENV{DBFORK_SOCKET} if $ENV{DBFORK_SOCKET};
    my $bin = $ENV{DBFORK_BIN} || 'dbfork';
    my @cmd = ( $bin, ( $o{store} ? ( '--store', $o{store} ) : () ), 'daemon', 'start', '--json' );
    my $pid = open( my $out, '-|' ) // die "dbfork: cannot fork: $!\n";
    if ( !$pid ) {
        open STDERR, '>&', \*STDOUT or die;    # one stream: JSON or the error line
        open STDIN, '<', '/dev/null';
        exec {$cmd[0]} @cmd or do { print "dbfork: cannot run $bin: $! (set DBFORK_BIN to the dbfork binary)\n"; require POSIX; POSIX::_exit(127) };
    }
    my $text = do { local $/; <$out> };
    close $out;
    if ( $? != 0 ) {
        my @lines = grep { /\S/ } split /\n/, ( $text // '' );
        die( ( @lines ? $lines[-1] : "dbfork daemon start failed (exit " . ( $? >> 8 ) . ")" ) . "\n" );
    }
    my ($json) = $text =~ /(\{.*\})/s or die "dbfork daemon start printed no JSON: $text\n";
    return JSON::PP->new->decode($json)->{socket};
}

sub socket_path { $_[0]{socket} }

# call(METHOD, PATH, BODY) -> decoded JSON; dies with "dbfork serve: ..."
sub call {
    my ( $self, $method, $path, $body ) = @_;
    $self->check_api if !$self->{api_checked} && $path !~ m{^/v1/health};
    return $self->_send( $method, $path, $body );
}

# check_api dies (one line) unless the daemon speaks $API_VERSION: a daemon
# left running by another dbfork install would otherwise misread requests
# in the middle of a test run.
sub check_api {
    my ($self) = @_;
    my $h = $self->_send( GET => '/v1/health' );
    my $api = ref $h eq 'HASH' ? ( $h->{api} // 0 ) : 0;
    if ( $api != $API_VERSION ) {
        my $v = ( ref $h eq 'HASH' && $h->{version} ) ? $h->{version} : 'unknown';
        die "dbfork: the daemon on $self->{socket} speaks API version $api (dbfork $v) but Test::Dbfork speaks $API_VERSION: "
          . "stop it with `dbfork daemon stop` and run again (or install the dbfork that matches)\n";
    }
    $self->{api_checked} = 1;
    return $h;
}

sub _send {
    my ( $self, $method, $path, $body ) = @_;
    my $sock = IO::Socket::UNIX->new( Type => SOCK_STREAM(), Peer => $self->{socket} )
      or die "dbfork: no `dbfork serve` answers on $self->{socket} ($!): run `dbfork daemon start`, or unset DBFORK_SOCKET to have one started\n";
    my $data = defined $body ? JSON::PP->new->utf8->canonical->encode($body) : '';
    my $req  = "$method $path HTTP/1.0\r\nHost: dbfork\r\nConnection: close\r\n";
    $req .= "Content-Type: application/json\r\n" if defined $body;
    $req .= "Content-Length: " . length($data) . "\r\n\r\n" . $data;
    print {$sock} $req or die "dbfork: write to $self->{socket}: $!\n";
    local $/;
    my $resp = <$sock>;
    close $sock;
    die "dbfork: empty answer from $self->{socket}\n" unless defined $resp && length $resp;
    my ( $head, $content ) = split /\r\n\r\n/, $resp, 2;
    my ($status) = $head =~ m{^HTTP/\d\.\d (\d+)} or die "dbfork: bad answer from $self->{socket}\n";
    my $decoded = ( defined $content && length $content ) ? eval { JSON::PP->new->utf8->decode($content) } : undef;
    if ( $status >= 300 ) {
        my $msg = ref $decoded eq 'HASH' ? $decoded->{error} : "HTTP $status";
        die "dbfork serve: $msg\n";
    }
    return $decoded;
}

sub health { $_[0]->call( GET => '/v1/health' ) }

sub acquire {
    my ( $self, $recipe, %o ) = @_;
    # The environment goes along: a build's run steps run in it, not in
    # the daemon's (docs/api.md).
    return $self->call( POST => '/v1/leases', { recipe => Cwd::abs_path($recipe), env => {%ENV}, %o } );
}

sub release { $_[0]->call( DELETE => "/v1/leases/$_[1]" ) }
sub keep    { $_[0]->call( POST   => "/v1/leases/$_[1]/keep", {} ) }
sub leases  { $_[0]->call( GET    => '/v1/leases' )->{leases} }

# reset(ID) -> the lease, back to the golden state in place (same DSN;
# open connections are broken).
sub reset { $_[0]->call( POST => "/v1/leases/$_[1]/reset", {} ) }

# create_database(ID) -> {name, dsn, env}: a fresh database cloned inside
# the lease's server (only when the lease's "fresh" is "database").
sub create_database { $_[0]->call( POST => "/v1/leases/$_[1]/databases", {} ) }
sub drop_database   { $_[0]->call( DELETE => "/v1/leases/$_[1]/databases/$_[2]" ) }

# fresh(ID) -> {mode, name, dsn, env, conn}: fresh data for the lease's
# next test, the way the daemon finds cheapest: "slot", "database",
# "reset", or "none" (the lease was untouched).
sub fresh { $_[0]->call( POST => "/v1/leases/$_[1]/fresh", {} ) }

1;
