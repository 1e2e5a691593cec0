package project

import (
	"context"
	"path/filepath"

	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/recipe"
)

// Recipe is a parsed dbfork.toml, named here so front ends need only this
// package to get from a file to a golden.
type Recipe = recipe.Recipe

// RecipePath is the absolute path of a recipe file ("": ./dbfork.toml),
// as a daemon needs it: its working directory means nothing to us.
func RecipePath(file string) (string, error) {
	if file == "" {
		file = recipe.DefaultFile
	}
	return filepath.Abs(file)
}

// LoadRecipe reads the recipe at path ("": ./dbfork.toml), expanding its
// globs, with the rights of the user ctx acts for (caller.With: a
// daemon's peer, the user behind sudo); without one, this process's.
func LoadRecipe(ctx context.Context, path string) (*recipe.Recipe, error) {
	if path == "" {
		path = recipe.DefaultFile
	}
	return golden.LoadRecipe(ctx, path)
}
