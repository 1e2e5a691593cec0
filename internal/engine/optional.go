package engine

import "context"

// The optional interfaces a build asks an engine through a type
// assertion (the others, asked by clones and leases, are in engine.go and
// protected.go). All of an engine's optional abilities are declared in
// this package, so a driver implements them without importing golden.

// CleanChecker is implemented by engines that can prove a data dir was
// shut down cleanly (PostgreSQL: pg_controldata; MariaDB: its log).
type CleanChecker interface {
	CheckCleanShutdown(ctx context.Context, dataDir, logFile string) error
}

// Sealer is an engine that reworks a cleanly stopped golden with one more
// server run before it is checksummed (MariaDB: the clones' redo log,
// stored sparse). The server it starts goes through spec.OnLaunch.
type Sealer interface {
	Seal(ctx context.Context, spec StartSpec) error
}

// BuildTuner is implemented by engines with server settings for build
// servers only (never for clones).
type BuildTuner interface {
	BuildSettings() map[string]string
}

// SlotMaker is implemented by engines that can copy the recipe's
// database into further databases of the same server at build time
// (PostgreSQL: CREATE DATABASE … TEMPLATE … STRATEGY FILE_COPY). It
// returns where each slot's files are, relative to the data dir, in the
// order of names: an instance whose slots no one hands out closes them and
// leaves those dirs out of its check of the golden.
type SlotMaker interface {
	MakeSlots(ctx context.Context, srv *Server, names []string) (dirs []string, err error)
}
