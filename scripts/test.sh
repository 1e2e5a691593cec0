#!/usr/bin/env bash
# Runs the whole test suite: real PostgreSQL servers, real OverlayFS
# mounts, real XFS and btrfs loop filesystems. Needs root.
source "$(dirname "$0")/lib.sh"
need_root "the test suite"
ensure_packages
ensure_go
cd "$REPO"
go vet ./...
go test -count=1 -timeout 40m ./...
# A bounded fuzz run of the recipe parser.
go test -run '^$' -fuzz FuzzParse -fuzztime 20s ./internal/recipe
