package golden

// FilesOf is filesOf for the package's external tests.
var FilesOf = filesOf
