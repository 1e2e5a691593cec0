package backend

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// fake is a backend table entry with every part settable; it is never
// probed or prepared (check is pure logic).
type fake struct {
	name, describe string
	caps           Caps
}

func (f fake) Name() string                                                   { return f.name }
func (f fake) Describe() string                                               { return f.describe }
func (f fake) Caps() Caps                                                     { return f.caps }
func (fake) Probe(ctx context.Context, dir string) error                      { return nil }
func (fake) Prepare(ctx context.Context, golden, clone, scratch string) error { return nil }
func (fake) Remove(ctx context.Context, clone, scratch string) error          { return nil }

// fakeCopyUp copies up and says where and how cheaply.
type fakeCopyUp struct{ fake }

func (fakeCopyUp) CheapCopyUp(string) bool               { return false }
func (fakeCopyUp) OwnedDir(clone, scratch string) string { return scratch }

// fakeHalfCopyUp copies up but does not say where copied files are.
type fakeHalfCopyUp struct{ fake }

func (fakeHalfCopyUp) CheapCopyUp(string) bool { return false }

type fakeYield struct {
	fake
	to, why string
}

func (y fakeYield) YieldTo() (string, string) { return y.to, y.why }

// A backend entered in the table without one of its required parts is
// refused, with a message naming the part.
func TestCheckRefusesMissingParts(t *testing.T) {
	ok := fake{name: "zfs", describe: "a dataset clone", caps: Caps{SharesExtents: true}}
	other := fake{name: "plain", describe: "a copy", caps: Caps{FullCopy: true}}
	if err := check([]Backend{ok, other, fakeCopyUp{fake{"ov", "mount", Caps{CopiesUp: true}}}}); err != nil {
		t.Fatalf("a complete table is refused: %v", err)
	}
	with := func(f func(*fake)) fake { b := ok; f(&b); return b }
	for _, c := range []struct {
		name  string
		table []Backend
		want  string
	}{
		{"no name", []Backend{with(func(b *fake) { b.name = "" })}, "name"},
		{"auto as a name", []Backend{with(func(b *fake) { b.name = "auto" })}, "other than auto"},
		{"name with spaces", []Backend{with(func(b *fake) { b.name = "z fs" })}, "lowercase word"},
		{"registered twice", []Backend{ok, ok}, "registered twice"},
		{"no Describe", []Backend{with(func(b *fake) { b.describe = " " })}, "no Describe"},
		{"no Caps", []Backend{with(func(b *fake) { b.caps = Caps{} })}, "exactly one of"},
		{"Caps with only ColdPageCache", []Backend{with(func(b *fake) { b.caps = Caps{ColdPageCache: true} })}, "exactly one of"},
		{"two kinds", []Backend{with(func(b *fake) { b.caps = Caps{SharesExtents: true, FullCopy: true} })}, "exactly one of"},
		{"copies up, no CopyUpper", []Backend{with(func(b *fake) { b.caps = Caps{CopiesUp: true} })}, "CopyUpper"},
		{"copies up, no Diverger", []Backend{fakeHalfCopyUp{with(func(b *fake) { b.caps = Caps{CopiesUp: true} })}}, "Diverger"},
		{"yields to no backend", []Backend{fakeYield{ok, "nfs", "why"}, other}, "yields to"},
		{"yields to itself", []Backend{fakeYield{ok, "zfs", "why"}, other}, "yields to"},
		{"yields without a why", []Backend{fakeYield{ok, "plain", ""}, other}, "yields to"},
	} {
		err := check(c.table)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// The real table: every backend has every required part; the five
// backends users know keep their names, auto's order among them and their
// capabilities (a new backend may go anywhere between them, with an
// entry in the test matrices: TestMatricesCoverTable).
func TestTableComplete(t *testing.T) {
	if err := check(all); err != nil {
		t.Fatal(err)
	}
	known := []struct {
		name string
		caps Caps
	}{
		{"btrfs", Caps{SharesExtents: true, ColdPageCache: true}},
		{"reflink", Caps{SharesExtents: true, ColdPageCache: true}},
		{"overlay", Caps{CopiesUp: true}},
		{"userns-overlay", Caps{CopiesUp: true}},
		{"copy", Caps{FullCopy: true}},
	}
	at := -1
	for _, k := range known {
		i := slices.Index(Names, k.name)
		if i <= at {
			t.Fatalf("%s is at %d in %v: auto's order among the known backends changed", k.name, i, Names)
		}
		at = i
		if c := all[i].Caps(); c != k.caps {
			t.Errorf("%s: caps %+v, want %+v", k.name, c, k.caps)
		}
	}
	if Names[len(Names)-1] != "copy" {
		t.Errorf("auto's last resort is %s, want copy", Names[len(Names)-1])
	}
	for _, b := range all {
		if g, err := Get(b.Name()); err != nil || g != b {
			t.Errorf("Get(%s) = %v, %v", b.Name(), g, err)
		}
		_, golden := b.(GoldenSide)
		if b.Name() == "btrfs" && !golden {
			t.Error("btrfs has no golden side: its goldens would not be subvolumes")
		}
	}
	wantChoices := "auto, " + strings.Join(Names[:len(Names)-1], ", ") + " or copy"
	if got := Choices(); got != wantChoices || !strings.HasPrefix(got, "auto, btrfs, reflink, overlay") {
		t.Errorf("Choices() = %q, want %q", got, wantChoices)
	}
	_, err := Get("nfs3")
	if want := `unknown backend "nfs3" (use auto, ` + strings.Join(Names, ", ") + ")"; err == nil || err.Error() != want {
		t.Errorf("Get(nfs3): %v, want %s", err, want)
	}
}
