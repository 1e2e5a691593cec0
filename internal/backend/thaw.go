package backend

// ThawDataDir undoes FreezeDataDir for a moment of root's own (a one-time
// migration of a golden's modes); it reports whether there was anything
// to undo, so the caller can freeze the dir again.
func ThawDataDir(path string) (bool, error) {
	if !isSubvolume(path) {
		return false, nil
	}
	return true, setSubvolumeReadOnly(path, false)
}
