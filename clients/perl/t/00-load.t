# Loads every module of the distribution; needs no daemon.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/../lib";    # from a checkout (prove clients/perl/t); make test puts blib first anyway

require_ok($_) for qw(Test::Dbfork::Client Test::Dbfork::Fresh App::Prove::Plugin::Dbfork);
{ no warnings 'once'; is( $Test::Dbfork::Client::API_VERSION, 1, 'speaks API version 1' ); }
done_testing;
