package io.dbfork.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import javax.sql.DataSource;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

/** Eight classes at once (four per engine), each with its own lease for the class. */
class IsolationTest {
  abstract static class Base {
    @Test
    void onlyThisClassesRows(DataSource ds, DbforkDatabase db) throws Exception {
      assertEquals(DbforkDatabase.LEASE, db.mode());
      assertTrue(db.isLease());
      Rows.isolated(ds, db, getClass().getSimpleName());
    }

    @Test
    void sameLeaseForTheClass(DataSource ds, DbforkDatabase db) throws Exception {
      Rows.isolated(ds, db, getClass().getSimpleName());
      assertTrue(db.jdbcUrl().startsWith(expectedPrefix()), db.jdbcUrl());
    }

    abstract String expectedPrefix();
  }

  @Dbfork(recipe = "src/test/recipes/postgres/dbfork.toml")
  abstract static class Pg extends Base {
    @Override
    String expectedPrefix() {
      return "jdbc:postgresql://127.0.0.1:";
    }
  }

  @Dbfork(recipe = "src/test/recipes/mariadb/dbfork.toml")
  abstract static class Maria extends Base {
    @Override
    String expectedPrefix() {
      return "jdbc:mariadb://127.0.0.1:";
    }
  }

  @Nested
  class PgA extends Pg {
  }

  @Nested
  class PgB extends Pg {
  }

  @Nested
  class PgC extends Pg {
  }

  @Nested
  class PgD extends Pg {
  }

  @Nested
  class MariaA extends Maria {
  }

  @Nested
  class MariaB extends Maria {
  }

  @Nested
  class MariaC extends Maria {
  }

  @Nested
  class MariaD extends Maria {
  }
}
