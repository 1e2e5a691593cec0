package io.dbfork.junit;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Map;

/**
 * The dbfork binary: $DBFORK_BIN, else the one a dbfork-binary-linux-* artifact on the class path carries, else
 * "dbfork" from PATH. A jar cannot run a file inside itself, so the carried one is copied once to
 * {@code ${XDG_CACHE_HOME:-~/.cache}/dbfork/bin/SHA256/dbfork} and checked against its sha256 before every use:
 * a copy someone changed is replaced, never run.
 */
public final class Binary {
  private static final String PREFIX = "/io/dbfork/binary/";

  private Binary() {
  }

  /** The binary to run for env (the process environment, or a test's). */
  public static String find(Map<String, String> env) {
    String bin = env.getOrDefault("DBFORK_BIN", "");
    if (!bin.isEmpty()) {
      return bin;
    }
    Path carried = extract(env, platform());
    return carried != null ? carried.toString() : "dbfork";
  }

  /** linux-amd64 or linux-arm64 (null elsewhere: there is no dbfork for it). */
  static String platform() {
    if (!System.getProperty("os.name", "").toLowerCase().startsWith("linux")) {
      return null;
    }
    switch (System.getProperty("os.arch", "")) {
      case "amd64":
      case "x86_64":
        return "linux-amd64";
      case "aarch64":
      case "arm64":
        return "linux-arm64";
      default:
        return null;
    }
  }

  static synchronized Path extract(Map<String, String> env, String platform) {
    if (platform == null) {
      return null;
    }
    String want;
    try (InputStream sum = Binary.class.getResourceAsStream(PREFIX + platform + "/dbfork.sha256")) {
      if (sum == null) {
        return null; // no binary artifact on the class path
      }
      want = new String(sum.readAllBytes(), StandardCharsets.US_ASCII).trim().split("\\s+")[0];
    } catch (IOException e) {
      return null;
    }
    Path dir = cacheDir(env).resolve(want);
    Path bin = dir.resolve("dbfork");
    try {
      if (Files.isRegularFile(bin) && want.equals(sha256(bin)) && Files.isExecutable(bin)) {
        return bin;
      }
      Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
      Path tmp = Files.createTempFile(dir, "dbfork-", ".tmp");
      try (InputStream in = Binary.class.getResourceAsStream(PREFIX + platform + "/dbfork")) {
        if (in == null) {
          throw new IOException("the artifact has a checksum but no binary");
        }
        Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
        String got = sha256(tmp);
        if (!want.equals(got)) {
          throw new IOException("the carried binary's sha256 is " + got + ", its artifact says " + want);
        }
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwxr-xr-x"));
        Files.move(tmp, bin, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
      } finally {
        Files.deleteIfExists(tmp);
      }
      return bin;
    } catch (IOException e) {
      throw new DbforkException("dbfork: cannot unpack the dbfork binary of dbfork-binary-" + platform + " into "
          + dir + ": " + e.getMessage() + " (or set DBFORK_BIN to a dbfork binary)", "missing_tool", 0);
    }
  }

  static Path cacheDir(Map<String, String> env) {
    String xdg = env.getOrDefault("XDG_CACHE_HOME", "");
    Path base = xdg.startsWith("/") ? Path.of(xdg) : Path.of(System.getProperty("user.home"), ".cache");
    return base.resolve("dbfork").resolve("bin");
  }

  static String sha256(Path file) throws IOException {
    MessageDigest md;
    try {
      md = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IOException(e);
    }
    try (InputStream in = Files.newInputStream(file)) {
      byte[] buf = new byte[1 << 16];
      for (int n; (n = in.read(buf)) > 0;) {
        md.update(buf, 0, n);
      }
    }
    return HexFormat.of().formatHex(md.digest());
  }
}
