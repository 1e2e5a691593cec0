package fetch

import (
	"strings"
	"testing"
)

func TestVersionOrderAndMatch(t *testing.T) {
	vs := []string{"16.10.0", "16.9.0", "15.4.0", "10.5.0-1", "10.5.0", "16.4.0", "9.6.24"}
	got := strings.Join(Sorted(vs), " ")
	if got != "9.6.24 10.5.0 10.5.0-1 15.4.0 16.4.0 16.9.0 16.10.0" {
		t.Fatalf("sorted: %s", got)
	}
	for want, exp := range map[string]string{"16": "16.10.0", "16.4": "16.4.0", "16.4.0": "16.4.0", "1": "", "16.99": "", "10.5.0": "10.5.0-1", "": "16.10.0"} {
		if n := Newest(vs, want); n != exp {
			t.Errorf("Newest(%q) = %q, want %q", want, n, exp)
		}
	}
	if Matches("116.1.0", "16") || Matches("16.40.0", "16.4") || !Matches("11.4.5", "11.4") {
		t.Fatal("prefix matching must respect dots")
	}
	if s := Suggest(vs, "16.99"); s != "16.4.0, 16.9.0, 16.10.0" {
		t.Fatalf("same-major suggestion: %s", s)
	}
	if s := Suggest(vs, "13"); s != "9.6.24, 10.5.0-1, 15.4.0, 16.10.0" {
		t.Fatalf("newest of each major: %s", s)
	}
}

func TestMirrorURL(t *testing.T) {
	settings := `<settings><mirrors>
	  <mirror><id>x</id><mirrorOf>snapshots</mirrorOf><url>http://a.example/snap</url></mirror>
	  <mirror><id>corp</id><mirrorOf>external:*,!internal</mirrorOf><url> http://repo.corp.example/maven </url></mirror>
	</mirrors></settings>`
	if u := MirrorURL([]byte(settings)); u != "http://repo.corp.example/maven" {
		t.Fatalf("mirror: %q", u)
	}
	if u := MirrorURL([]byte("<settings/>")); u != "" {
		t.Fatalf("no mirror: %q", u)
	}
}
