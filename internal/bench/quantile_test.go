package bench

import "testing"

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct{ q, want float64 }{{0.5, 5}, {0.99, 10}, {1, 10}, {0, 1}, {0.1, 1}, {0.2, 2}} {
		if got := Quantile(xs, c.q); got != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("empty")
	}
	if xs[0] != 5 {
		t.Error("Quantile sorted its input in place")
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"100M": 100 << 20, "1G": 1 << 30, "1.5G": 3 << 29, "2048K": 2 << 20, "1GiB": 1 << 30, "5g": 5 << 30} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "abc", "-1G", "0", "10K", "1X"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	if FormatSize(1<<30) != "1G" || FormatSize(100<<20) != "100M" {
		t.Errorf("FormatSize: %s %s", FormatSize(1<<30), FormatSize(100<<20))
	}
}
