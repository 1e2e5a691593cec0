// Command dbfork gives every test run its own writable, pre-seeded
// database in milliseconds. See README.md.
package main

import (
	"os"

	"github.com/dbfork/dbfork/internal/cli"
	"github.com/dbfork/dbfork/internal/reexec"
)

func main() {
	// dbfork starting itself again as one of its helpers (reexec.Register).
	reexec.Main()
	os.Exit(cli.Main(os.Args[1:]))
}
