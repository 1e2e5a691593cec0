package io.dbfork.junit;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/** Finds the daemon once per JVM (and store) by the one rule of docs/api.md, "Finding the daemon". */
public final class Daemon {
  private static final Map<String, Client> CLIENTS = new ConcurrentHashMap<>();
  private static final Set<Path> GOLDENS = ConcurrentHashMap.newKeySet();

  private Daemon() {
  }

  /**
   * $DBFORK_SOCKET as it is, else what {@code BINARY [--store STORE] daemon start --json}
   * prints (it starts a daemon for the store when none answers; BINARY as {@link Binary#find} says). Fails with
   * dbfork's one-line reason.
   */
  public static Path findSocket(Map<String, String> env, String store) {
    String sock = env.get("DBFORK_SOCKET");
    if (sock != null && !sock.isEmpty()) {
      return Path.of(sock);
    }
    String bin = Binary.find(env);
    List<String> cmd = new java.util.ArrayList<>(List.of(bin));
    if (store != null && !store.isEmpty()) {
      cmd.addAll(List.of("--store", store));
    }
    cmd.addAll(List.of("daemon", "start", "--json"));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
    pb.environment().clear();
    pb.environment().putAll(env);
    Process p;
    try {
      p = pb.start();
    } catch (IOException e) {
      throw new DbforkException("dbfork: cannot run " + bin + ": add the dbfork-binary artifact of this platform "
          + "(dbfork-junit brings it), install dbfork, or set DBFORK_BIN to it "
          + "(or DBFORK_SOCKET to a running daemon's socket)", "missing_tool", 0);
    }
    try {
      // Small outputs: read stderr on its own thread so neither pipe fills.
      var err = java.util.concurrent.CompletableFuture.supplyAsync(() -> readAll(p.getErrorStream()));
      String out = readAll(p.getInputStream());
      int code = p.waitFor();
      if (code != 0) {
        String last = "dbfork: daemon start failed (exit " + code + ")";
        for (String l : err.join().split("\n")) {
          if (!l.isBlank()) {
            last = l.strip();
          }
        }
        throw new DbforkException(last, "unavailable", 0);
      }
      return Path.of((String) Json.object(out).get("socket"));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new DbforkException("dbfork: interrupted while starting the daemon", "unavailable", 0);
    } catch (IllegalArgumentException e) {
      throw new DbforkException("dbfork: daemon start printed no socket: " + e.getMessage(), "unavailable", 0);
    }
  }

  private static String readAll(java.io.InputStream in) {
    try (in) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      return "";
    }
  }

  /**
   * The client for a store ("" for dbfork's default), found once per JVM. A daemon started on demand
   * leaves when idle: a background thread touches it while the JVM runs, so it stays between test classes.
   */
  public static Client client(String store) {
    return CLIENTS.computeIfAbsent(store == null ? "" : store, s -> {
      Client c = new Client(findSocket(System.getenv(), s));
      Thread t = new Thread(() -> {
        while (true) {
          try {
            Thread.sleep(1000);
            c.call("GET", "/v1/health?touch=1", null);
          } catch (InterruptedException e) {
            return;
          } catch (DbforkException e) {
            // the daemon went away: the next call says so
          }
        }
      }, "dbfork-keep-alive");
      t.setDaemon(true);
      t.start();
      return c;
    });
  }

  /** Makes sure the recipe's golden exists, once per JVM. */
  static void ensureGolden(Client c, Path recipe) {
    Path abs = recipe.toAbsolutePath().normalize();
    // A golden whose build failed fails once per run with the build's
    // error; every later class gets one short line pointing at it.
    RuntimeException failed = FAILED.get(abs);
    if (failed != null) {
      throw new DbforkException("the golden of " + abs + " could not be built earlier in this run (see the first dbfork error)",
          "invalid", 0);
    }
    if (!GOLDENS.contains(abs)) {
      try {
        c.ensureGolden(abs);
      } catch (RuntimeException e) {
        FAILED.put(abs, e);
        throw e;
      }
      GOLDENS.add(abs);
    }
  }

  private static final java.util.Map<Path, RuntimeException> FAILED = new ConcurrentHashMap<>();
}
