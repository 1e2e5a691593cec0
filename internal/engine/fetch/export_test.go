package fetch

// Probe is probe, for tests.
var Probe = probe
