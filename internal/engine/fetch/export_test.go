package fetch

import "context"

// Probe is probe as ourselves, for tests.
func Probe(ctx context.Context, dir string, argv []string, label string) (string, error) {
	return probe(ctx, &worker{uid: -1, dir: dir}, dir, argv, label)
}

// Pins is the pin table, for tests that serve archives of their own.
var Pins = pins

// PinKey is the pin table's key for one version of a package.
func (p *Package) PinKey(version string) string { return p.pinKey(version) }

// KnownFormat says whether an unpacker of that name exists.
func KnownFormat(format string) bool { _, ok := unpackers[format]; return ok }
