package io.dbfork.junit;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The test class gets a pre-seeded database from dbfork: inject a {@link javax.sql.DataSource} or a
 * {@link DbforkDatabase} into test methods, {@code @BeforeEach}/{@code @BeforeAll} methods or the constructor.
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Inherited
@ExtendWith(DbforkExtension.class)
public @interface Dbfork {
  /** The dbfork.toml; default: system property dbfork.recipe, $DBFORK_RECIPE, or ./dbfork.toml. */
  String recipe() default "";

  /** A store of your own (passed as {@code dbfork --store}); default dbfork's ($DBFORK_STORE). */
  String store() default "";

  /**
   * Clone backend, as {@code dbfork up --backend} takes it (the server checks the name); default: system property
   * dbfork.backend, $DBFORK_BACKEND, else the server's auto.
   */
  String backend() default "";

  /**
   * true: every test gets the golden's data of its own, by the fastest mode the lease offers (a database
   * cloned inside the server, dropped after the test; else the lease reset before the test). Tests running
   * at once use different leases. false: one lease for the whole class.
   */
  boolean freshPerTest() default false;
}
