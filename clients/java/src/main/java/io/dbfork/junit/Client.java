package io.dbfork.junit;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A small client for the API of {@code dbfork serve} (HTTP/1.1 and JSON on
 * a unix socket; docs/api.md in the dbfork repository). The daemon learns
 * this JVM's PID from the socket, so its leases end when the JVM does.
 */
public final class Client {
  /** The API version this client speaks; /v1/health says the daemon's (its "api"). */
  public static final int API_VERSION = 1;

  private final Path socket;
  private volatile boolean apiChecked;

  public Client(Path socket) {
    this.socket = socket;
  }

  public Path socket() {
    return socket;
  }

  public Map<String, Object> health() {
    return Json.object(call("GET", "/v1/health", null));
  }

  public Map<String, Object> ensureGolden(Path recipe) {
    // The environment goes along: a build's run steps run in it
    // (JAVA_HOME, the build tool on PATH), not in the daemon's.
    return Json.object(call("POST", "/v1/goldens", "{\"recipe\": " + Json.quote(recipe.toAbsolutePath().toString())
        + ", \"env\": " + envJson() + "}"));
  }

  /** Acquires a lease; backend may be null or empty for the default. */
  public Lease acquire(Path recipe, String backend) {
    StringBuilder b = new StringBuilder("{\"recipe\": ").append(Json.quote(recipe.toAbsolutePath().toString()))
        .append(", \"env\": ").append(envJson());
    if (backend != null && !backend.isEmpty()) {
      b.append(", \"backend\": ").append(Json.quote(backend));
    }
    return new Lease(Json.object(call("POST", "/v1/leases", b.append('}').toString())));
  }

  /** This process's environment as a JSON object. */
  static String envJson() {
    StringBuilder b = new StringBuilder("{");
    for (Map.Entry<String, String> e : System.getenv().entrySet()) {
      if (b.length() > 1) {
        b.append(", ");
      }
      b.append(Json.quote(e.getKey())).append(": ").append(Json.quote(e.getValue()));
    }
    return b.append('}').toString();
  }

  /** Ends the lease but keeps its instance running (until {@code dbfork down ID}). */
  public Lease keep(String id) {
    return new Lease(Json.object(call("POST", "/v1/leases/" + id + "/keep", "{}")));
  }

  public void release(String id) {
    call("DELETE", "/v1/leases/" + id, null);
  }

  /** Back to the golden's data in place: same DSN, open connections broken. */
  public Lease reset(String id) {
    return new Lease(Json.object(call("POST", "/v1/leases/" + id + "/reset", "{}")));
  }

  /** A database cloned inside the lease's server (the lease's fresh is "database"). */
  public Lease.Database createDatabase(String id) {
    return new Lease.Database(Json.object(call("POST", "/v1/leases/" + id + "/databases", "{}")));
  }

  /**
   * Fresh data for the lease's next test, the way the daemon finds cheapest: the next slot of the
   * golden, a database cloned in the server, a reset in place, or nothing (mode "none").
   */
  public Lease.Database fresh(String id) {
    return new Lease.Database(Json.object(call("POST", "/v1/leases/" + id + "/fresh", "{}")));
  }

  public void dropDatabase(String id, String name) {
    call("DELETE", "/v1/leases/" + id + "/databases/" + name, null);
  }

  @SuppressWarnings("unchecked")
  public List<Map<String, Object>> leases() {
    Object l = Json.object(call("GET", "/v1/leases", null)).get("leases");
    return l == null ? new ArrayList<>() : (List<Map<String, Object>>) l;
  }

  /** One HTTP/1.1 exchange (Connection: close); answers the body or throws the daemon's error. */
  /**
   * Fails (kind "conflict") unless the daemon speaks {@link #API_VERSION}: a daemon left running by another
   * dbfork install would otherwise misread requests in the middle of a test run.
   */
  public Map<String, Object> checkApi() {
    Map<String, Object> h = Json.object(send("GET", "/v1/health", null));
    Object api = h.get("api");
    if (!(api instanceof Number) || ((Number) api).intValue() != API_VERSION) {
      Object version = h.get("version");
      throw new DbforkException("dbfork: the daemon on " + socket + " speaks API version " + (api == null ? 0 : api)
          + " (dbfork " + (version == null || "".equals(version) ? "unknown" : version) + ") but dbfork-junit speaks "
          + API_VERSION + ": stop it with `dbfork daemon stop` and run again (or install the dbfork that matches)",
          "conflict", 409);
    }
    apiChecked = true;
    return h;
  }

  String call(String method, String path, String body) {
    if (!apiChecked && !path.startsWith("/v1/health")) {
      checkApi();
    }
    return send(method, path, body);
  }

  private String send(String method, String path, String body) {
    byte[] data = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
    StringBuilder req = new StringBuilder(method).append(' ').append(path).append(" HTTP/1.1\r\n")
        .append("Host: dbfork\r\nConnection: close\r\n");
    if (body != null) {
      req.append("Content-Type: application/json\r\nContent-Length: ").append(data.length).append("\r\n");
    }
    req.append("\r\n");
    byte[] raw;
    try (SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX)) {
      ch.connect(UnixDomainSocketAddress.of(socket));
      ByteBuffer out = ByteBuffer.allocate(req.length() * 4 + data.length);
      out.put(req.toString().getBytes(StandardCharsets.UTF_8)).put(data).flip();
      while (out.hasRemaining()) {
        ch.write(out);
      }
      ByteArrayOutputStream all = new ByteArrayOutputStream();
      ByteBuffer in = ByteBuffer.allocate(16384);
      while (ch.read(in) >= 0) {
        all.write(in.array(), 0, in.position());
        in.clear();
      }
      raw = all.toByteArray();
    } catch (IOException e) {
      throw new DbforkException("dbfork: " + method + " " + path + " on " + socket + ": " + e.getMessage(),
          "unavailable", 0);
    }
    return answer(method, path, raw);
  }

  private static String answer(String method, String path, byte[] raw) {
    int end = indexOf(raw, "\r\n\r\n".getBytes(StandardCharsets.US_ASCII), 0);
    String headText = end < 0 ? "" : new String(raw, 0, end, StandardCharsets.ISO_8859_1);
    if (!headText.startsWith("HTTP/1.")) {
      throw new DbforkException("dbfork: not an HTTP answer to " + method + " " + path, "internal", 0);
    }
    String[] head = headText.split("\r\n");
    int status = Integer.parseInt(head[0].split(" ")[1]);
    boolean chunked = false;
    for (String h : head) {
      String l = h.toLowerCase();
      chunked |= l.startsWith("transfer-encoding:") && l.contains("chunked");
    }
    byte[] bytes = java.util.Arrays.copyOfRange(raw, end + 4, raw.length);
    String body = new String(chunked ? unchunk(bytes) : bytes, StandardCharsets.UTF_8);
    if (status >= 300) {
      String msg = "HTTP " + status + ": " + body.strip();
      String kind = "internal";
      try {
        Map<String, Object> err = Json.object(body);
        msg = String.valueOf(err.get("error"));
        kind = String.valueOf(err.getOrDefault("kind", "internal"));
      } catch (RuntimeException ignored) {
        // not JSON: keep the raw text
      }
      throw new DbforkException("dbfork: " + msg, kind, status);
    }
    return body;
  }

  private static byte[] unchunk(byte[] b) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    byte[] crlf = {'\r', '\n'};
    int i = 0;
    while (true) {
      int nl = indexOf(b, crlf, i);
      String size = new String(b, i, nl - i, StandardCharsets.US_ASCII).split(";")[0].trim();
      int n = Integer.parseInt(size, 16);
      if (n == 0) {
        return out.toByteArray();
      }
      out.write(b, nl + 2, n);
      i = nl + 2 + n + 2;
    }
  }

  private static int indexOf(byte[] b, byte[] pat, int from) {
    outer:
    for (int i = from; i <= b.length - pat.length; i++) {
      for (int j = 0; j < pat.length; j++) {
        if (b[i + j] != pat[j]) {
          continue outer;
        }
      }
      return i;
    }
    return -1;
  }
}
