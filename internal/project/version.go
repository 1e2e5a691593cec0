package project

import (
	"context"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/engine/engines"
	"github.com/dbfork/dbfork/internal/errs"
)

// The version policy: which server a golden made elsewhere (pulled,
// imported) runs on here. The exact server version is part of a golden's
// key, so only that version will do.

// EngineCheck is CheckEngine over open, in the shape oci.EngineCheck has.
func EngineCheck(open Opener) func(ctx context.Context, name, version string) (engine.Engine, error) {
	return func(ctx context.Context, name, version string) (engine.Engine, error) {
		return CheckEngine(ctx, open, name, version)
	}
}

// CheckEngine returns the server this machine would build with for a
// golden built with engine name at version (an installed server, or one
// the engine cache holds or may fetch), and refuses any other version.
func CheckEngine(ctx context.Context, open Opener, name, version string) (engine.Engine, error) {
	eng, err := open(ctx, engine.Want{Engine: name, Version: MajorVersion(name, engine.ShortVersion(version))})
	if err != nil {
		return nil, errs.Unsupported("the golden was built with %s %s, which this machine lacks (%v); install it, or build here: a build with another server version has another key", name, engine.ShortVersion(version), err)
	}
	have, err := eng.Version(ctx)
	if err != nil {
		return nil, err
	}
	if have != version {
		return nil, errs.Conflict("the golden was built with %s %s but this machine runs %s %s; the exact server version is part of the key, so recipes here have another key: install %s %s, or build here (and push with --cache-to)", name, engine.ShortVersion(version), name, engine.ShortVersion(have), name, engine.ShortVersion(version))
	}
	return eng, nil
}

// MajorVersion is the part of a server version a recipe's version names,
// as the engine says ("15" of PostgreSQL 15.14, "10.11" of MariaDB 10.11.6).
func MajorVersion(name, v string) string {
	e, err := engines.Lookup(name)
	if err != nil {
		return v
	}
	return e.Major(v)
}
