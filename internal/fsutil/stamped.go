package fsutil

// StampedXattr is the extended attribute an engine's seal leaves on a
// file it stamped (its size and mtime right after): an incremental build
// skips such a file while both still hold (engine.MarkStamped). It is
// build bookkeeping: the copy of an intermediate golden keeps it, a clone
// does not get it (copying it cost an xattr transaction for each of a slot
// golden's 9,300 relation files, a fifth of the clone).
const StampedXattr = "user.dbfork.stamped"
