package io.dbfork.junit;

import java.io.PrintWriter;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.util.Map;
import java.util.logging.Logger;
import javax.sql.DataSource;

/** Where a test's data is: the JDBC URL, user and password, and how it was made fresh. */
public final class DbforkDatabase {
  private final Lease lease;
  private final String dsn;
  private final Map<String, String> env;
  private final String mode;
  private final Lease.Jdbc jdbc;

  DbforkDatabase(Lease lease, String dsn, Map<String, String> env, String mode) {
    this.lease = lease;
    this.dsn = dsn;
    this.env = env;
    this.mode = mode;
    this.jdbc = Lease.jdbc(lease.engine(), dsn);
  }

  public String jdbcUrl() {
    return jdbc.url();
  }

  public String user() {
    return jdbc.user();
  }

  public String password() {
    return jdbc.password();
  }

  /** The URL form (postgres://… or mysql://…), as DATABASE_URL would have it. */
  public String dsn() {
    return dsn;
  }

  /** DATABASE_URL and the engine's variables for this database. */
  public Map<String, String> env() {
    return env;
  }

  /** The mode of the lease's own database (one lease for the class); it was "class" before. */
  public static final String LEASE = "lease";

  /** Whether this is the lease's own database (mode "lease"; "class" is accepted, its former name). */
  public boolean isLease() {
    return LEASE.equals(mode) || "class".equals(mode);
  }

  /**
   * {@link #LEASE} (the lease's own database: one lease for the class), or how freshPerTest made the data fresh:
   * "slot", "database" (cloned inside the server) or "reset" (docs/api.md, "The client contract").
   */
  public String mode() {
    return mode;
  }

  public Lease lease() {
    return lease;
  }

  public Connection connect() throws SQLException {
    return DriverManager.getConnection(jdbcUrl(), user(), password());
  }

  /** A plain DataSource over DriverManager (wrap it in your pool if you want one). */
  public DataSource dataSource() {
    return new DataSource() {
      @Override
      public Connection getConnection() throws SQLException {
        return connect();
      }

      @Override
      public Connection getConnection(String user, String password) throws SQLException {
        return DriverManager.getConnection(jdbcUrl(), user, password);
      }

      @Override
      public PrintWriter getLogWriter() {
        return DriverManager.getLogWriter();
      }

      @Override
      public void setLogWriter(PrintWriter out) {
        DriverManager.setLogWriter(out);
      }

      @Override
      public void setLoginTimeout(int seconds) {
        DriverManager.setLoginTimeout(seconds);
      }

      @Override
      public int getLoginTimeout() {
        return DriverManager.getLoginTimeout();
      }

      @Override
      public Logger getParentLogger() throws SQLFeatureNotSupportedException {
        throw new SQLFeatureNotSupportedException("no parent logger");
      }

      @Override
      public <T> T unwrap(Class<T> iface) throws SQLException {
        if (iface.isInstance(this)) {
          return iface.cast(this);
        }
        throw new SQLException("not a wrapper of " + iface);
      }

      @Override
      public boolean isWrapperFor(Class<?> iface) {
        return iface.isInstance(this);
      }
    };
  }

  @Override
  public String toString() {
    return "dbfork " + mode + " " + jdbcUrl();
  }
}
