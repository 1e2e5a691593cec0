// Package engines picks the engine implementation a recipe names.
package engines

import (
	"context"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/engine/mysql"
	"github.com/dbfork/dbfork/internal/engine/postgres"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/recipe"
)

// Open locates the server binaries a recipe needs, and refuses recipe
// settings the engine keeps for itself.
func Open(ctx context.Context, r *recipe.Recipe) (engine.Engine, error) {
	e, err := open(ctx, r)
	if err != nil {
		return nil, err
	}
	if err := engine.CheckSettings(e, r.Settings); err != nil {
		return nil, err
	}
	return e, nil
}

func open(ctx context.Context, r *recipe.Recipe) (engine.Engine, error) {
	switch r.Engine {
	case "postgres":
		return postgres.New(ctx, r.Bindir, r.Version)
	case "mariadb":
		return mysql.New(ctx, mysql.MariaDB, r.Bindir, r.Version)
	case "mysql":
		return mysql.New(ctx, mysql.MySQL, r.Bindir, r.Version)
	}
	return nil, errs.Unsupported("engine %q is not supported (use postgres, mariadb or mysql)", r.Engine)
}
