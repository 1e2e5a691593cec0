package io.dbfork.junit;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import javax.sql.DataSource;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ExtensionContext.Namespace;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolutionException;
import org.junit.jupiter.api.extension.ParameterResolver;
import org.junit.platform.commons.support.AnnotationSupport;

/**
 * JUnit 5 extension behind {@link Dbfork}: per test class, one lease (or, with freshPerTest, the golden's
 * data per test); leases are acquired by this JVM over the daemon's socket, so they end with the JVM even
 * when it crashes, and are released when the class's tests are done. Safe under parallel execution.
 */
public class DbforkExtension implements BeforeAllCallback, BeforeEachCallback, AfterEachCallback,
    ParameterResolver {
  private static final Namespace NS = Namespace.create(DbforkExtension.class);

  /** One test class's leases; closed (released) by JUnit when the class is done. */
  static final class ClassState implements ExtensionContext.Store.CloseableResource {
    final Client client;
    final Path recipe;
    final String backend;
    final boolean perTest;
    final ConcurrentLinkedQueue<Slot> idle = new ConcurrentLinkedQueue<>();
    final List<Lease> all = new ArrayList<>();
    final Set<String> failed = ConcurrentHashMap.newKeySet(); // ids of leases a failed test used
    final boolean keepFailed;
    DbforkDatabase classDb;

    ClassState(Dbfork cfg) {
      this(cfg, System.getenv());
    }

    /** env stands for the process environment (the contract test passes its cases' variables). */
    ClassState(Dbfork cfg, Map<String, String> env) {
      this.recipe = recipe(cfg, env);
      this.backend = backend(cfg, env);
      this.keepFailed = keepFailed(env);
      this.perTest = cfg.freshPerTest();
      this.client = Daemon.client(cfg.store());
      Daemon.ensureGolden(client, recipe);
    }

    Lease acquire() {
      Lease l = client.acquire(recipe, backend);
      synchronized (all) {
        all.add(l);
      }
      return l;
    }

    @Override
    public void close() {
      List<Lease> ls;
      synchronized (all) {
        ls = new ArrayList<>(all);
        all.clear();
      }
      for (Lease l : ls) {
        try {
          if (keepFailed && failed.contains(l.id())) {
            client.keep(l.id());
            System.err.println("dbfork: kept instance " + l.id() + " of a failed test: " + l.dsn()
                + " (dbfork down " + l.id() + " when done)");
            continue;
          }
          client.release(l.id());
        } catch (DbforkException e) {
          // reclaimed already, or the daemon went away: nothing to leak
        }
      }
    }
  }

  /** A lease used by one test at a time (freshPerTest). */
  static final class Slot {
    Lease lease;

    Slot(Lease lease) {
      this.lease = lease;
    }
  }

  /** What one test holds (freshPerTest). */
  record Held(Slot slot, DbforkDatabase db, String database) {
  }

  static Path recipe(Dbfork cfg) {
    return recipe(cfg, System.getenv());
  }

  /** The annotation's recipe, else -Ddbfork.recipe, else $DBFORK_RECIPE, else ./dbfork.toml. */
  static Path recipe(Dbfork cfg, Map<String, String> env) {
    String r = cfg.recipe();
    if (r.isEmpty()) {
      r = System.getProperty("dbfork.recipe", "");
    }
    if (r.isEmpty()) {
      r = env.getOrDefault("DBFORK_RECIPE", "");
    }
    Path p = Path.of(r.isEmpty() ? "dbfork.toml" : r).toAbsolutePath().normalize();
    if (!Files.isRegularFile(p)) {
      throw new DbforkException("dbfork: recipe " + p + " not found: set @Dbfork(recipe = ...), "
          + "-Ddbfork.recipe or DBFORK_RECIPE", "not_found", 404);
    }
    return p;
  }

  /** The annotation's backend, else -Ddbfork.backend, else $DBFORK_BACKEND, else none (the server's auto). */
  static String backend(Dbfork cfg, Map<String, String> env) {
    String b = cfg.backend();
    if (b.isEmpty()) {
      b = System.getProperty("dbfork.backend", "");
    }
    if (b.isEmpty()) {
      b = env.getOrDefault("DBFORK_BACKEND", "");
    }
    return b;
  }

  /** DBFORK_KEEP_FAILED set to anything but the empty string (docs/api.md, "The client contract"). */
  static boolean keepFailed(Map<String, String> env) {
    return !env.getOrDefault("DBFORK_KEEP_FAILED", "").isEmpty();
  }

  /** The mode a fresh call is reported as: the server's, with an untouched lease ("none") as "reset". */
  static String mode(Lease.Database f) {
    return "none".equals(f.mode()) ? "reset" : f.mode();
  }

  private static Dbfork config(ExtensionContext ctx) {
    return AnnotationSupport.findAnnotation(ctx.getRequiredTestClass(), Dbfork.class)
        .orElseThrow(() -> new DbforkException("dbfork: " + ctx.getRequiredTestClass().getName()
            + " uses DbforkExtension without @Dbfork(recipe = ...)", "invalid", 0));
  }

  private static ClassState state(ExtensionContext ctx) {
    return ctx.getStore(NS).get(ClassState.class, ClassState.class);
  }

  @Override
  public void beforeAll(ExtensionContext ctx) {
    ClassState st = ctx.getStore(NS).getOrComputeIfAbsent(ClassState.class, k -> new ClassState(config(ctx)),
        ClassState.class);
    if (!st.perTest && st.classDb == null) {
      Lease l = st.acquire();
      st.classDb = new DbforkDatabase(l, l.dsn(), l.env(), DbforkDatabase.LEASE);
    }
  }

  @Override
  public void beforeEach(ExtensionContext ctx) {
    ClassState st = state(ctx);
    if (st == null || !st.perTest) {
      return;
    }
    Slot slot = st.idle.poll();
    if (slot == null) {
      slot = new Slot(st.acquire());
    }
    // The daemon decides how (POST /v1/leases/{id}/fresh); an untouched lease ("none") has the
    // golden's data already, as after a reset.
    Lease.Database f = st.client.fresh(slot.lease.id());
    String mode = mode(f);
    Held held = new Held(slot, new DbforkDatabase(slot.lease, f.dsn(), f.env(), mode),
        "database".equals(mode) ? f.name() : null);
    ctx.getStore(NS).put(Held.class, held);
  }

  @Override
  public void afterEach(ExtensionContext ctx) {
    ClassState st = state(ctx);
    Held held = ctx.getStore(NS).remove(Held.class, Held.class);
    if (st == null) {
      return;
    }
    boolean failedTest = ctx.getExecutionException().isPresent();
    if (failedTest && held == null && st.classDb != null) {
      st.failed.add(st.classDb.lease().id());
    }
    if (held == null) {
      return;
    }
    if (failedTest && st.keepFailed) {
      // Kept as the failure left it: its database not dropped, the lease not handed to the next test
      // (whose fresh call would wipe it).
      st.failed.add(held.slot().lease.id());
      return;
    }
    if (held.database() != null) {
      try {
        st.client.dropDatabase(held.slot().lease.id(), held.database());
      } catch (DbforkException e) {
        // the lease ended: its databases went with it
      }
    }
    st.idle.offer(held.slot());
  }

  @Override
  public boolean supportsParameter(ParameterContext pc, ExtensionContext ctx) {
    Class<?> t = pc.getParameter().getType();
    return t == DataSource.class || t == DbforkDatabase.class;
  }

  @Override
  public Object resolveParameter(ParameterContext pc, ExtensionContext ctx) {
    DbforkDatabase db = current(ctx);
    return pc.getParameter().getType() == DataSource.class ? db.dataSource() : db;
  }

  private static DbforkDatabase current(ExtensionContext ctx) {
    Held held = ctx.getStore(NS).get(Held.class, Held.class);
    if (held != null) {
      return held.db();
    }
    ClassState st = state(ctx);
    if (st == null) {
      throw new ParameterResolutionException("dbfork: no database here (is the class annotated @Dbfork?)");
    }
    if (st.classDb == null) {
      throw new ParameterResolutionException("dbfork: with freshPerTest the database is per test: "
          + "take it in test or @BeforeEach methods");
    }
    return st.classDb;
  }
}
