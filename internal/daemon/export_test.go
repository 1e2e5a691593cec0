package daemon

// ReflinkAfter is reflinkAfter, for the package's outside tests.
const ReflinkAfter = reflinkAfter
