package io.dbfork.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import javax.sql.DataSource;

/** The checks the tests share: who wrote which rows, and which class used which server. */
final class Rows {
  /** JDBC URL -> the test class that used it: no two classes may share a database. */
  static final Map<String, String> OWNER = new ConcurrentHashMap<>();

  private Rows() {
  }

  static List<String> all(DataSource ds) throws SQLException {
    List<String> rows = new ArrayList<>();
    try (Connection c = ds.getConnection(); ResultSet rs = c.createStatement().executeQuery(
        "select who from notes order by id")) {
      while (rs.next()) {
        rows.add(rs.getString(1));
      }
    }
    return rows;
  }

  static void insert(DataSource ds, String who) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(
        "insert into notes(who) values (?)")) {
      st.setString(1, who);
      st.executeUpdate();
    }
  }

  /** Writes a marker row, lets the other classes write theirs, and sees only the golden's and its own. */
  static void isolated(DataSource ds, DbforkDatabase db, String owner) throws Exception {
    String prev = OWNER.putIfAbsent(db.jdbcUrl(), owner);
    assertTrue(prev == null || prev.equals(owner), db.jdbcUrl() + " used by " + prev + " and " + owner);
    insert(ds, owner + ":" + Thread.currentThread().getName());
    Thread.sleep(200);
    List<String> rows = all(ds);
    assertEquals("golden", rows.get(0), rows.toString());
    for (String r : rows.subList(1, rows.size())) {
      assertTrue(r.startsWith(owner + ":"), "saw another class's row " + r + " in " + rows);
    }
  }
}
