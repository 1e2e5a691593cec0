package fsutil

import (
	"strconv"
	"strings"

	"github.com/dbfork/dbfork/internal/errs"
)

// ParseSize reads sizes like 100M, 1.5G, 20GiB, 512K or a plain byte
// count (binary units, case-insensitive).
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	shown := t
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f <= 0 {
		return 0, errs.Invalid("size %q: give a positive number with K, M, G or T (e.g. 100M, 1.5G, 20G)", shown)
	}
	return int64(f * float64(mult)), nil
}
