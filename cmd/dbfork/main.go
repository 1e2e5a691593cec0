// Command dbfork gives every test run its own writable, pre-seeded
// database in milliseconds. See README.md.
package main

import (
	"os"

	"github.com/dbfork/dbfork/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:])) }
