package backend

import (
	"context"
	"fmt"
	"strings"

	"github.com/dbfork/dbfork/internal/errs"
)

// all is the table of backends, in the order auto prefers them: cheap
// first writes first, plain copy last — except where a backend yields to
// another that works too (Yielder: where reflink works and OverlayFS does
// too, auto takes OverlayFS). A new backend is one file and one line here
// (docs/adding-a-backend.md).
var all = mustCheck([]Backend{
	Btrfs{},
	Reflink{},
	Overlay{},
	UsernsOverlay{},
	Copy{},
})

// Names lists the backends in the table's order.
var Names = names(all)

func names(bs []Backend) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Name()
	}
	return out
}

// Choices lists what --backend takes, for help texts: "auto, btrfs, ...
// or copy".
func Choices() string {
	return "auto, " + strings.Join(Names[:len(Names)-1], ", ") + " or " + Names[len(Names)-1]
}

func mustCheck(bs []Backend) []Backend {
	if err := check(bs); err != nil {
		panic("backend table: " + err.Error())
	}
	return bs
}

// check refuses a table with an entry that misses a required part (see
// the checklist on Backend), so that a backend added without one fails
// the first test that loads the package, not a user.
func check(bs []Backend) error {
	seen := map[string]bool{}
	for _, b := range bs {
		n := b.Name()
		if n == "" || n == "auto" || strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return fmt.Errorf("%T: name %q is not a lowercase word other than auto", b, n)
		}
		if seen[n] {
			return fmt.Errorf("%s: registered twice", n)
		}
		seen[n] = true
		if strings.TrimSpace(b.Describe()) == "" {
			return fmt.Errorf("%s: no Describe text", n)
		}
		c := b.Caps()
		kinds := 0
		for _, k := range []bool{c.SharesExtents, c.CopiesUp, c.FullCopy} {
			if k {
				kinds++
			}
		}
		if kinds != 1 {
			return fmt.Errorf("%s: Caps must say exactly one of SharesExtents, CopiesUp and FullCopy", n)
		}
		if c.CopiesUp {
			if _, ok := b.(CopyUpper); !ok {
				return fmt.Errorf("%s: copies up but does not say when that is cheap (CopyUpper)", n)
			}
			if _, ok := b.(Diverger); !ok {
				return fmt.Errorf("%s: copies up but does not say where copied files are (Diverger)", n)
			}
		}
	}
	for _, b := range bs {
		if y, ok := b.(Yielder); ok {
			to, why := y.YieldTo()
			if !seen[to] || to == b.Name() || strings.TrimSpace(why) == "" {
				return fmt.Errorf("%s: yields to %q, which is not another backend in the table, or says no why", b.Name(), to)
			}
		}
	}
	return nil
}

// Get returns a backend by name.
func Get(name string) (Backend, error) {
	for _, b := range all {
		if b.Name() == name {
			return b, nil
		}
	}
	return nil, errs.Invalid("unknown backend %q (use auto, %s)", name, strings.Join(Names, ", "))
}

// Probe is one backend's verdict for a store.
type Probe struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`

	b Backend
}

// Caps is what the probed backend's clones cost.
func (p Probe) Caps() Caps {
	if p.b == nil {
		return Caps{}
	}
	return p.b.Caps()
}

// Describe says what choosing the probed backend means.
func (p Probe) Describe() string {
	if p.b == nil {
		return ""
	}
	return p.b.Describe()
}

// ProbeAll tries every backend for dir.
func ProbeAll(ctx context.Context, dir string) []Probe {
	var out []Probe
	for _, b := range all {
		p := Probe{Name: b.Name(), OK: true, b: b}
		if err := b.Probe(ctx, dir); err != nil {
			p.OK, p.Error = false, err.Error()
		}
		out = append(out, p)
	}
	return out
}

// Select resolves a backend name ("auto" or one of Names) for cloning
// golden in the store at dir and says why it was chosen.
func Select(ctx context.Context, name, dir, golden string) (Backend, string, error) {
	if name != "" && name != "auto" {
		b, err := Get(name)
		if err != nil {
			return nil, "", err
		}
		if err := usable(ctx, b, dir, golden); err != nil {
			return nil, "", errs.Unsupported("backend %s does not work here: %v", name, err)
		}
		return b, "requested with --backend", nil
	}
	var skipped []string
	for _, b := range all {
		if err := usable(ctx, b, dir, golden); err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", b.Name(), err))
			continue
		}
		if y, ok := b.(Yielder); ok {
			to, why := y.YieldTo()
			if ob, err := Get(to); err == nil && usable(ctx, ob, dir, golden) == nil {
				return ob, why, nil
			}
		}
		return b, b.Describe(), nil
	}
	return nil, "", errs.Unsupported("no backend works for %s: %s", dir, strings.Join(skipped, "; "))
}
