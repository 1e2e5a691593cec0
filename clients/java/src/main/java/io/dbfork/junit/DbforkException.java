package io.dbfork.junit;

/** A failure to get a database from dbfork, with the daemon's error kind. */
public class DbforkException extends RuntimeException {
  private final String kind;
  private final int status;

  public DbforkException(String message, String kind, int status) {
    super(message);
    this.kind = kind;
    this.status = status;
  }

  /** The daemon's error kind: invalid, not_found, busy, unsupported, missing_tool, unavailable, internal... */
  public String kind() {
    return kind;
  }

  /** The HTTP status, 0 when the daemon was not reached. */
  public int status() {
    return status;
  }
}
