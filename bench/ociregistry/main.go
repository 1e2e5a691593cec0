// Command ociregistry runs a CNCF distribution registry (filesystem
// storage) on loopback for bench/oci.sh: it prints its host:port on
// stdout and serves until killed.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/dbfork/dbfork/internal/oci/ocitest"
)

func main() {
	root := flag.String("root", "", "storage directory")
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	// With a user, the registry asks for basic auth (htpasswd), so a
	// client that sends no credentials or the wrong ones is refused.
	user := flag.String("user", "", "require this user (htpasswd auth)")
	password := flag.String("password", "", "the user's password (with -user)")
	flag.Parse()
	if *root == "" {
		fmt.Fprintln(os.Stderr, "ociregistry: give -root DIR")
		os.Exit(2)
	}
	reg, stop, err := ocitest.Serve(*root, *addr, ocitest.Options{User: *user, Password: *password})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ociregistry:", err)
		os.Exit(1)
	}
	defer stop()
	fmt.Println(reg.Host)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
