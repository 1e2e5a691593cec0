package store

import "path/filepath"

// EnginesDir is the engine cache: server builds fetched on demand, one
// directory per ENGINE-VERSION-ARCH, shared by every golden and instance.
func (s *Store) EnginesDir() string { return filepath.Join(s.Root, "engines") }
