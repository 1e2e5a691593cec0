package io.dbfork.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;

/**
 * Connection pools with freshPerTest (README, "Connection pools"): a connection made per test from the
 * DbforkDatabase follows each test's fresh database; one the app keeps across tests fails loudly rather
 * than showing an earlier test's rows. One test at a time, so the tests share one lease.
 */
@Execution(ExecutionMode.SAME_THREAD)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Dbfork(recipe = "src/test/recipes/postgres/dbfork.toml", freshPerTest = true)
class PoolPerTestTest {
  Connection pool; // the README's pattern: made in @BeforeEach, closed in @AfterEach
  Connection kept; // the app's module-level pool: made once, kept

  @BeforeEach
  void open(DbforkDatabase db) throws SQLException {
    pool = db.connect();
  }

  @AfterEach
  void close() throws SQLException {
    pool.close();
  }

  @AfterAll
  void closeKept() throws SQLException {
    if (kept != null) {
      kept.close();
    }
  }

  static List<String> rows(Connection c) throws SQLException {
    List<String> out = new ArrayList<>();
    try (ResultSet rs = c.createStatement().executeQuery("select who from notes order by id")) {
      while (rs.next()) {
        out.add(rs.getString(1));
      }
    }
    return out;
  }

  static void insert(Connection c, String who) throws SQLException {
    c.createStatement().executeUpdate("insert into notes(who) values ('" + who + "')");
  }

  @RepeatedTest(3)
  @Order(1)
  void perTestPoolSeesTheGolden() throws SQLException {
    assertEquals(List.of("golden"), rows(pool), "a per-test connection saw an earlier test's rows");
    insert(pool, "per-test");
  }

  @Test
  @Order(2)
  void keepsAConnection(DbforkDatabase db) throws SQLException {
    kept = db.connect();
    assertEquals(List.of("golden"), rows(kept));
    insert(kept, "kept");
  }

  @Test
  @Order(3)
  void keptConnectionFailsLoudly() {
    assertThrows(SQLException.class, () -> rows(kept),
        "a connection kept from the test before still works: it would show that test's rows");
  }
}
