package io.dbfork.junit;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Just enough JSON for the daemon's answers and our requests (no dependencies). */
final class Json {
  private final String s;
  private int i;

  private Json(String s) {
    this.s = s;
  }

  static Object parse(String text) {
    Json p = new Json(text);
    Object v = p.value();
    p.ws();
    if (p.i != p.s.length()) {
      throw new IllegalArgumentException("trailing data in JSON at " + p.i);
    }
    return v;
  }

  @SuppressWarnings("unchecked")
  static Map<String, Object> object(String text) {
    Object v = parse(text);
    if (!(v instanceof Map)) {
      throw new IllegalArgumentException("not a JSON object: " + text);
    }
    return (Map<String, Object>) v;
  }

  static String quote(String v) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : v.toCharArray()) {
      switch (c) {
        case '"' -> b.append("\\\"");
        case '\\' -> b.append("\\\\");
        case '\n' -> b.append("\\n");
        case '\r' -> b.append("\\r");
        case '\t' -> b.append("\\t");
        default -> {
          if (c < 0x20) {
            b.append(String.format("\\u%04x", (int) c));
          } else {
            b.append(c);
          }
        }
      }
    }
    return b.append('"').toString();
  }

  private void ws() {
    while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
      i++;
    }
  }

  private Object value() {
    ws();
    if (i >= s.length()) {
      throw new IllegalArgumentException("unexpected end of JSON");
    }
    char c = s.charAt(i);
    switch (c) {
      case '{':
        return obj();
      case '[':
        return arr();
      case '"':
        return str();
      case 't':
        return lit("true", Boolean.TRUE);
      case 'f':
        return lit("false", Boolean.FALSE);
      case 'n':
        return lit("null", null);
      default:
        return num();
    }
  }

  private Object lit(String word, Object v) {
    if (!s.startsWith(word, i)) {
      throw new IllegalArgumentException("bad JSON at " + i);
    }
    i += word.length();
    return v;
  }

  private Map<String, Object> obj() {
    Map<String, Object> m = new LinkedHashMap<>();
    i++;
    ws();
    if (s.charAt(i) == '}') {
      i++;
      return m;
    }
    while (true) {
      ws();
      String k = str();
      ws();
      expect(':');
      m.put(k, value());
      ws();
      if (s.charAt(i) == ',') {
        i++;
        continue;
      }
      expect('}');
      return m;
    }
  }

  private List<Object> arr() {
    List<Object> l = new ArrayList<>();
    i++;
    ws();
    if (s.charAt(i) == ']') {
      i++;
      return l;
    }
    while (true) {
      l.add(value());
      ws();
      if (s.charAt(i) == ',') {
        i++;
        continue;
      }
      expect(']');
      return l;
    }
  }

  private void expect(char c) {
    if (i >= s.length() || s.charAt(i) != c) {
      throw new IllegalArgumentException("expected '" + c + "' in JSON at " + i);
    }
    i++;
  }

  private String str() {
    expect('"');
    StringBuilder b = new StringBuilder();
    while (true) {
      char c = s.charAt(i++);
      if (c == '"') {
        return b.toString();
      }
      if (c != '\\') {
        b.append(c);
        continue;
      }
      char e = s.charAt(i++);
      switch (e) {
        case 'n' -> b.append('\n');
        case 't' -> b.append('\t');
        case 'r' -> b.append('\r');
        case 'b' -> b.append('\b');
        case 'f' -> b.append('\f');
        case 'u' -> {
          b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
          i += 4;
        }
        default -> b.append(e);
      }
    }
  }

  private Object num() {
    int start = i;
    while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
      i++;
    }
    if (start == i) {
      throw new IllegalArgumentException("bad JSON at " + i);
    }
    return Double.parseDouble(s.substring(start, i));
  }
}
