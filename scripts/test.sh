#!/usr/bin/env bash
# Runs the whole test suite: real PostgreSQL servers, real OverlayFS
# mounts, real XFS and btrfs loop filesystems. Needs root.
source "$(dirname "$0")/lib.sh"
need_root "the test suite"
ensure_packages
ensure_go
cd "$REPO"
go vet ./...
if [ -n "$(gofmt -l .)" ]; then
  echo "these files need gofmt -w: $(gofmt -l . | tr '\n' ' ')" >&2
  exit 1
fi
go test -count=1 -timeout 40m ./...
# A bounded fuzz run of the recipe parser.
go test -run '^$' -fuzz FuzzParse -fuzztime 20s ./internal/recipe
# The test-runner clients, against a real `dbfork serve`: the pytest
# plugin installed with pip into a throwaway venv (Debian's pytest, xdist
# and psycopg), and the prove plugin with Debian's DBI/DBD::Pg.
go build -o bin/dbfork ./cmd/dbfork
export DBFORK_BIN="$REPO/bin/dbfork"
venv="$(mktemp -d)"
trap 'rm -rf "$venv" "$REPO/clients/python/build"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$venv"
DBFORK_BINARY="$REPO/bin/dbfork" "$venv/bin/pip" install -q --no-build-isolation --no-deps ./clients/python
# Django and pytest-django (tests/test_django.py), Vitest and Jest (npm),
# JUnit 5 (mvn).
ensure_client_deps "$venv"
(cd clients/python && "$venv/bin/python" -m pytest -q -p no:cacheprovider tests)
prove clients/perl/t
(cd clients/node && npm test)
clients/java/run-tests.sh
# Every artifact scripts/release.sh makes, installed as a new user would.
"$REPO/scripts/test-install.sh"
# The CI jobs of docs/ci.md, run from the doc against a local registry (1-2 minutes).
"$REPO/scripts/test-ci-recipe.sh"
