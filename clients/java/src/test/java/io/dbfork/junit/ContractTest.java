package io.dbfork.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.annotation.Annotation;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The client contract (docs/api.md, "The client contract"; clients/contract.json) checked against the extension's
 * class state with a real daemon: every case of the shared file (the environment of a case stands for the
 * process's), the fresh mode names, the lease's own mode, and keep-failed.
 */
class ContractTest {
  static final String RECIPE = Path.of("src/test/recipes/postgres/dbfork.toml").toAbsolutePath().toString();

  static Map<String, Object> contract() throws Exception {
    return Json.object(Files.readString(Path.of("..", "contract.json")));
  }

  /** A @Dbfork as a test class would carry it, with a case's explicit options. */
  static Dbfork options(Map<String, String> o) {
    return new Dbfork() {
      @Override
      public Class<? extends Annotation> annotationType() {
        return Dbfork.class;
      }

      @Override
      public String recipe() {
        return o.getOrDefault("recipe", "");
      }

      @Override
      public String store() {
        return "";
      }

      @Override
      public String backend() {
        return o.getOrDefault("backend", "");
      }

      @Override
      public boolean freshPerTest() {
        return false;
      }
    };
  }

  @SuppressWarnings("unchecked")
  static Map<String, String> subst(Object m) {
    Map<String, String> values = Map.of("@recipe", RECIPE,
        "@missing", Path.of("target", "missing", "dbfork.toml").toAbsolutePath().toString());
    Map<String, String> out = new HashMap<>();
    if (m != null) {
      for (Map.Entry<String, Object> e : ((Map<String, Object>) m).entrySet()) {
        String v = (String) e.getValue();
        out.put(e.getKey(), values.getOrDefault(v, v));
      }
    }
    return out;
  }

  @Test
  @SuppressWarnings("unchecked")
  void everyCase() throws Exception {
    Map<String, Object> c = contract();
    assertEquals(c.get("lease_mode"), DbforkDatabase.LEASE);
    List<Object> modes = (List<Object>) c.get("fresh_modes");
    for (Object o : (List<Object>) c.get("cases")) {
      Map<String, Object> k = (Map<String, Object>) o;
      String name = (String) k.get("name");
      Map<String, String> env = subst(k.get("env"));
      Map<String, String> opt = subst(k.get("option"));
      if (!env.containsKey("DBFORK_RECIPE") && !opt.containsKey("recipe")) {
        opt.put("recipe", RECIPE);
      }
      DbforkExtension.ClassState st = new DbforkExtension.ClassState(options(opt), env);
      try {
        Lease l = st.acquire();
        Map<String, Object> want = (Map<String, Object>) k.get("want");
        if (want.containsKey("backend")) {
          assertEquals(want.get("backend"), l.json().get("backend"), name);
        }
        for (int i = 0; i < 2; i++) {
          String m = DbforkExtension.mode(st.client.fresh(l.id()));
          assertTrue(modes.contains(m), name + ": mode " + m);
        }
      } finally {
        st.close();
      }
    }
  }

  @Test
  void keepFailed() throws Exception {
    assertTrue(((Map<?, ?>) contract().get("variables")).containsKey("DBFORK_KEEP_FAILED"));
    // A lease a failed test used is kept: only a kept instance can be taken down by id.
    DbforkExtension.ClassState st = new DbforkExtension.ClassState(options(Map.of("recipe", RECIPE)),
        Map.of("DBFORK_KEEP_FAILED", "1"));
    Lease l = st.acquire();
    st.failed.add(l.id());
    st.close();
    st.client.call("DELETE", "/v1/instances/" + l.id(), null);
    // Without the variable it is released like any other.
    st = new DbforkExtension.ClassState(options(Map.of("recipe", RECIPE)), Map.of());
    String id = st.acquire().id();
    st.failed.add(id);
    st.close();
    Client client = st.client;
    DbforkException e = assertThrows(DbforkException.class,
        () -> client.call("DELETE", "/v1/instances/" + id, null));
    assertEquals("not_found", e.kind());
  }
}
