package io.dbfork.junit;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class ReadmeTest {
  /**
   * The README's test class (a user's project: its own package, imports
   * and recipe path) holds ExampleTest's test method as the tests run it;
   * scripts/test-install.sh builds a fresh project from the README's
   * blocks and runs it.
   */
  @Test
  void readmeShowsTheExampleTheTestsRun() throws Exception {
    String readme = Files.readString(Path.of("README.md"));
    String example = Files.readString(Path.of("src/test/java/io/dbfork/junit/ExampleTest.java"));
    int from = example.indexOf("  @Test");
    int to = example.lastIndexOf("  }\n") + 4;
    assertTrue(from > 0 && to > from, "ExampleTest.java has no test method");
    String method = example.substring(from, to);
    assertTrue(readme.contains(method), "README.md lacks ExampleTest's test method as the tests run it:\n" + method);
  }
}
