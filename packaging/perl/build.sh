#!/usr/bin/env bash
# Part of scripts/release.sh (VERSION, SRC, OUT set): the CPAN-style
# Test-Dbfork distribution (ExtUtils::MakeMaker), OUT/perl/Test-Dbfork-VERSION.tar.gz.
set -euo pipefail
perl_dir="$SRC/clients/perl"
mkdir -p "$OUT/perl"
sed -i "s/^our \$VERSION = '.*';/our \$VERSION = '$VERSION';/" "$perl_dir"/lib/Test/Dbfork.pm "$perl_dir"/lib/Test/Dbfork/*.pm \
  "$perl_dir"/lib/App/Prove/Plugin/Dbfork.pm
(cd "$perl_dir" && perl Makefile.PL >/dev/null && make -s distcheck >/dev/null 2>&1 && make -s dist >/dev/null &&
  mv "Test-Dbfork-$VERSION.tar.gz" "$OUT/perl/")
