package io.dbfork.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.TestInstance;

/** freshPerTest: every test starts from the golden's data, tests at once on different leases. */
class FreshPerTestTest {
  @TestInstance(TestInstance.Lifecycle.PER_CLASS)
  abstract static class Base {
    final Set<String> modes = ConcurrentHashMap.newKeySet();

    @RepeatedTest(6)
    void startsFromTheGolden(DataSource ds, DbforkDatabase db) throws Exception {
      assertEquals(List.of("golden"), Rows.all(ds), "not the golden's data");
      Rows.insert(ds, "dirty");
      assertEquals(List.of("golden", "dirty"), Rows.all(ds));
      modes.add(db.mode());
    }

    @AfterAll
    void saidWhichMode() {
      // PostgreSQL 15 and MariaDB: the lease is reset in place.
      assertEquals(Set.of("reset"), modes);
    }
  }

  @Nested
  @Dbfork(recipe = "src/test/recipes/postgres/dbfork.toml", freshPerTest = true)
  class Postgres extends Base {
  }

  @Nested
  @Dbfork(recipe = "src/test/recipes/mariadb/dbfork.toml", freshPerTest = true)
  class Mariadb extends Base {
  }
}
