package io.dbfork.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** No daemon to be had, or a bad recipe: one clear line. */
class ErrorsTest {
  @Test
  void noDbforkBinary() {
    Map<String, String> env = new HashMap<>(Map.of("DBFORK_BIN", "/nonexistent/dbfork", "PATH", "/usr/bin:/bin"));
    DbforkException e = assertThrows(DbforkException.class, () -> Daemon.findSocket(env, null));
    assertTrue(e.getMessage().startsWith("dbfork: cannot run /nonexistent/dbfork: ") && e.getMessage().contains("install dbfork"), e.getMessage());
    assertEquals("missing_tool", e.kind());
  }

  @Test
  void daemonStartFailsWithItsLastLine(@TempDir Path tmp) throws Exception {
    Path fake = tmp.resolve("dbfork");
    Files.writeString(fake, "#!/bin/sh\necho noise >&2\necho 'dbfork: starting a daemon needs root' >&2\nexit 1\n");
    Files.setPosixFilePermissions(fake, PosixFilePermissions.fromString("rwxr-xr-x"));
    Map<String, String> env = Map.of("DBFORK_BIN", fake.toString(), "PATH", "/usr/bin:/bin");
    DbforkException e = assertThrows(DbforkException.class, () -> Daemon.findSocket(env, "/some/store"));
    assertEquals("dbfork: starting a daemon needs root", e.getMessage());
  }

  @Test
  void socketIsTakenAsItIs() {
    assertEquals(Path.of("/run/x.sock"), Daemon.findSocket(Map.of("DBFORK_SOCKET", "/run/x.sock"), "/ignored"));
  }

  @Test
  void noDaemonOnTheSocket(@TempDir Path tmp) {
    DbforkException e = assertThrows(DbforkException.class, () -> new Client(tmp.resolve("none.sock")).health());
    assertTrue(e.getMessage().startsWith("dbfork: GET /v1/health on "), e.getMessage());
    assertEquals("unavailable", e.kind());
  }

  @Dbfork(recipe = "no/such/dbfork.toml")
  static class Missing {
  }

  @Test
  void missingRecipe() {
    DbforkException e = assertThrows(DbforkException.class,
        () -> DbforkExtension.recipe(Missing.class.getAnnotation(Dbfork.class)));
    assertTrue(e.getMessage().matches("dbfork: recipe /.*/no/such/dbfork.toml not found: set @Dbfork\\(recipe = \\.\\.\\.\\), "
        + "-Ddbfork.recipe or DBFORK_RECIPE"), e.getMessage());
  }

  @Test
  void jdbcUrls() {
    Lease.Jdbc pg = Lease.jdbc("postgres", "postgres://app:p%40ss@127.0.0.1:5433/app?sslmode=disable");
    assertEquals("jdbc:postgresql://127.0.0.1:5433/app?sslmode=disable", pg.url());
    assertEquals("app", pg.user());
    assertEquals("p@ss", pg.password());
    assertEquals("jdbc:mariadb://127.0.0.1:3307/app", Lease.jdbc("mariadb", "mysql://u:x@127.0.0.1:3307/app").url());
  }

  @Test
  void json() {
    Map<String, Object> m = Json.object("{\"a\": [1, \"x\\\"y\\u00e9\"], \"b\": {\"c\": null, \"d\": true}}");
    assertEquals(java.util.List.of(1.0, "x\"y\u00e9"), m.get("a"));
    assertEquals("\"a\\\"b\\\\\"", Json.quote("a\"b\\"));
    assertThrows(IllegalArgumentException.class, () -> Json.parse("{\"a\": 1} x"));
  }
}
