package io.dbfork.junit;

import java.net.URI;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;

/** A lease as the daemon describes it (docs/api.md), with its JDBC face. */
public final class Lease {
  private final Map<String, Object> json;

  Lease(Map<String, Object> json) {
    this.json = json;
  }

  public String id() {
    return (String) json.get("id");
  }

  public String engine() {
    return (String) json.get("engine");
  }

  /** The URL form: postgres://… or mysql://…. */
  public String dsn() {
    return (String) json.get("dsn");
  }

  /** "database" (fresh databases cloned inside the server) or "reset". */
  public String fresh() {
    Object f = json.get("fresh");
    return f == null ? "reset" : (String) f;
  }

  /** DATABASE_URL and the engine's variables (PG*, MYSQL_*). */
  public Map<String, String> env() {
    return strings(json.get("env"));
  }

  public Map<String, Object> json() {
    return Collections.unmodifiableMap(json);
  }

  @SuppressWarnings("unchecked")
  static Map<String, String> strings(Object o) {
    Map<String, String> m = new HashMap<>();
    if (o instanceof Map) {
      ((Map<String, Object>) o).forEach((k, v) -> m.put(k, String.valueOf(v)));
    }
    return m;
  }

  /** A database cloned inside a leased server, or the answer of the fresh call. */
  public static final class Database {
    private final Map<String, Object> json;

    Database(Map<String, Object> json) {
      this.json = json;
    }

    public String name() {
      return (String) json.get("name");
    }

    public String dsn() {
      return (String) json.get("dsn");
    }

    public Map<String, String> env() {
      return strings(json.get("env"));
    }

    /** How the fresh call made it fresh: "slot", "database", "reset" or "none" (untouched). */
    public String mode() {
      Object m = json.get("mode");
      return m == null ? "database" : (String) m;
    }
  }

  /** jdbc:postgresql://host:port/db?… or jdbc:mariadb://host:port/db (user and password apart). */
  static Jdbc jdbc(String engine, String dsn) {
    URI u = URI.create(dsn);
    String scheme = switch (engine == null ? "" : engine) {
      case "postgres" -> "postgresql";
      case "mariadb" -> "mariadb";
      case "mysql" -> "mysql";
      default -> throw new DbforkException("dbfork: no JDBC URL for engine " + engine, "unsupported", 0);
    };
    String url = "jdbc:" + scheme + "://" + u.getHost() + ":" + u.getPort() + u.getRawPath()
        + (u.getRawQuery() == null ? "" : "?" + u.getRawQuery());
    String info = u.getRawUserInfo() == null ? "" : u.getRawUserInfo();
    int colon = info.indexOf(':');
    String user = colon < 0 ? info : info.substring(0, colon);
    String password = colon < 0 ? "" : info.substring(colon + 1);
    return new Jdbc(url, decode(user), decode(password));
  }

  private static String decode(String s) {
    return java.net.URLDecoder.decode(s.replace("+", "%2B"), java.nio.charset.StandardCharsets.UTF_8);
  }

  record Jdbc(String url, String user, String password) {
  }
}
