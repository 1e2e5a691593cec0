module github.com/dbfork/dbfork

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	golang.org/x/sys v0.49.0
)
