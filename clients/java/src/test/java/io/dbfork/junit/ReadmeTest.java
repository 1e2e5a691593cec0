package io.dbfork.junit;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class ReadmeTest {
  @Test
  void readmeShowsTheExampleTheTestsRun() throws Exception {
    String readme = Files.readString(Path.of("README.md"));
    String example = Files.readString(Path.of("src/test/java/io/dbfork/junit/ExampleTest.java"));
    assertTrue(readme.contains(example), "README.md lacks ExampleTest.java as the tests run it");
  }
}
