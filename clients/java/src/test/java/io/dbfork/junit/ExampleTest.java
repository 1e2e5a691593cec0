package io.dbfork.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.sql.Connection;
import java.sql.ResultSet;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

@Dbfork(recipe = "src/test/recipes/postgres/dbfork.toml")
class ExampleTest {
  @Test
  void seesTheSeedData(DataSource ds) throws Exception {
    try (Connection c = ds.getConnection();
        ResultSet rs = c.createStatement().executeQuery("select count(*) from notes")) {
      rs.next();
      assertEquals(1, rs.getInt(1));
    }
  }
}
