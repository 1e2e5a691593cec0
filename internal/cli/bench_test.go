package cli_test

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/bench"
)

// `dbfork bench` measures every method with real clones and servers and
// leaves nothing behind; on ext4 that is overlay, copy and both template
// strategies.
func TestBenchClone(t *testing.T) {
	e := newEnv(t)
	r := e.run("bench", "--sizes", "2M", "--runs", "2", "--workload", "500ms", "--json")
	if r.code != 0 {
		t.Fatalf("bench: %d %s", r.code, r.stderr)
	}
	var out struct{ Results []bench.CloneResult }
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Results) != 1 {
		t.Fatalf("bench --json: %v %s", err, r.stdout)
	}
	res := out.Results[0]
	got := map[string]bench.MethodResult{}
	for _, m := range res.Methods {
		got[m.Method] = m
		if len(m.Samples) != 2 {
			t.Errorf("%s: %d samples, want 2", m.Method, len(m.Samples))
		}
		for _, s := range m.Samples {
			if len(s.WritesMs) != bench.Writes || s.ReadyMs < s.CloneMs || s.CloneMs <= 0 || s.Workload == nil || s.Workload.Ops == 0 {
				t.Errorf("%s: sample %+v", m.Method, s)
			}
		}
	}
	for _, want := range []string{"overlay", "copy", "template:wal_log", "template:file_copy"} {
		if _, ok := got[want]; !ok {
			t.Errorf("method %s missing: %v", want, res.Methods)
		}
	}
	// A plain copy owns the whole golden; an overlay clone a part of it.
	golden := float64(res.GoldenBytes) / (1 << 20)
	if c := got["copy"].PrivateMiB.Median; c < golden*0.9 {
		t.Errorf("copy owns %.1f MiB of a %.1f MiB golden", c, golden)
	}
	if o := got["overlay"].PrivateMiB.Median; o <= 0 || o >= golden {
		t.Errorf("overlay clone owns %.1f MiB of a %.1f MiB golden", o, golden)
	}
	if res.Auto != "overlay" || res.Rows <= 0 || !strings.HasPrefix(res.Table, "pgbench") {
		t.Errorf("result %+v", res)
	}
	// The table form names every method; --out writes JSON and a plot.
	outFile := filepath.Join(e.root, "bench.json")
	text := e.mustRun("bench", "--sizes", "2M,3M", "--runs", "1", "--methods", "overlay,copy", "--workload", "0", "--out", outFile).stdout
	if f, err := os.Open(strings.TrimSuffix(outFile, ".json") + ".png"); err != nil {
		t.Errorf("no plot: %v", err)
	} else {
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil || cfg.Width < 600 {
			t.Errorf("plot: %+v %v", cfg, err)
		}
	}
	if data, err := os.ReadFile(outFile); err != nil || !strings.Contains(string(data), "\"first_write_ms\"") {
		t.Errorf("json file: %v", err)
	}
	if !strings.Contains(text, "overlay") || !strings.Contains(text, "clone+ready ms") {
		t.Errorf("table: %s", text)
	}
	for _, bad := range [][]string{{"bench", "--sizes", "1X"}, {"bench", "--runs", "0"}, {"bench", "--engine", "oracle"}, {"bench", "--methods", "zfs"}, {"bench", "--workload-clients", "0"}} {
		if r := e.run(bad...); r.code != 2 {
			t.Errorf("%v: exit %d %q, want 2", bad, r.code, r.stderr)
		}
	}
	// 900 TiB fits nowhere: refused before any data is generated.
	if r := e.run("bench", "--sizes", "900T"); r.code != 2 || !strings.Contains(r.stderr, "needs about") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Errorf("bench larger than the store: exit %d %q", r.code, r.stderr)
	}
	e.assertNothingLeft()
}

// `dbfork bench pool` runs real leases through a private daemon: every
// cycle's data is the golden's (isolated), --think is each cycle's own
// time on its data, and bad flags are one-line usage errors.
func TestBenchPool(t *testing.T) {
	e := newEnv(t)
	for _, mode := range []string{"release", "reset"} {
		t0 := time.Now()
		args := []string{"bench", "pool", "--mode", mode, "--clients", "1,2", "--cycles", "3", "--think", "100ms", "--json"}
		if mode == "reset" {
			args = append(args, "--min", "2", "--floor") // above one client: the default max follows it
		}
		r := e.mustRun(args...)
		var doc struct {
			Mode    string `json:"mode"`
			Results []struct {
				bench.PoolResult
				Mode     string  `json:"mode"`
				FloorP99 float64 `json:"floor_p99_ms"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Results) != 2 || doc.Mode != mode {
			t.Fatalf("%s: %v %s", mode, err, r.stdout)
		}
		out := doc.Results
		for i, res := range out {
			if !res.Isolated || res.Clients != i+1 || res.Acquires != 3*(i+1) || res.ThinkMs != 100 {
				t.Errorf("%s, %d clients: %+v", mode, i+1, res)
			}
		}
		if mode == "reset" && (out[0].Mode != "reset" || out[0].FloorP99 <= 0 || out[1].FloorP99 <= 0) {
			t.Errorf("reset mode ran %q, floor p99 %v/%v ms (--floor)", out[0].Mode, out[0].FloorP99, out[1].FloorP99)
		}
		// 3 cycles per scenario, one after another per client.
		if d := time.Since(t0); d < 600*time.Millisecond {
			t.Errorf("%s: two scenarios of 3 cycles with --think 100ms took %v", mode, d)
		}
	}
	for _, bad := range [][]string{{"--think", "-1s"}, {"--mode", "truncate"}, {"--clients", "0"}, {"--cycles", "0"}, {"--floor"}} {
		r := e.run(append([]string{"bench", "pool"}, bad...)...)
		if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("bench pool %v: exit %d %q, want one line and 2", bad, r.code, r.stderr)
		}
	}
}
