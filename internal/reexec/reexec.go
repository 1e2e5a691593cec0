// Package reexec is the one registry of dbfork's helper mains: small
// programs the dbfork binary (or a test binary) runs as when it starts
// itself again under a hidden first argument, to do one thing with other
// rights (unpack an archive as a fetch worker's uid, mount a rootless
// clone in fresh namespaces, read a clone as its instance's uid).
//
// A package registers its helper in init; nothing runs then. Main runs
// the one os.Args asks for, and is called explicitly, first thing, by
// cmd/dbfork's main and by the TestMain of every test binary that may
// start one (testenv.RunTiers calls it).
package reexec

import (
	"os"
	"sync"
)

var (
	mu      sync.Mutex
	helpers = map[string]func(args []string) int{}
)

// Register names a helper main: a binary started with name as its first
// argument runs fn with the arguments after it and exits with fn's code.
// Names start with "__dbfork-" so no command line typed by a user is
// taken for one.
func Register(name string, fn func(args []string) int) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := helpers[name]; dup {
		panic("reexec: " + name + " registered twice")
	}
	helpers[name] = fn
}

// Main runs the helper main os.Args names and exits with its code; it
// returns when os.Args names none.
func Main() {
	if code, ok := run(os.Args); ok {
		os.Exit(code)
	}
}

func run(argv []string) (int, bool) {
	if len(argv) < 2 {
		return 0, false
	}
	mu.Lock()
	fn := helpers[argv[1]]
	mu.Unlock()
	if fn == nil {
		return 0, false
	}
	return fn(argv[2:]), true
}
