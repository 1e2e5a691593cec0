package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/dbfork/dbfork/internal/engine"
)

// Seal on synthetic clusters: pg_control with a shutdown checkpoint and
// 1 MiB WAL segments of 8 KiB pages filled with 0xAA.
func TestSealWAL(t *testing.T) {
	const seg, page = 1 << 20, 8192
	cases := []struct {
		name     string
		lsn      uint64 // checkpoint location, in segment 2
		slots    bool
		wantSegs int  // segments left
		punched  bool // the kept segment has holes
	}{
		{"first page", 2*seg + 100, false, 1, true},
		{"mid segment", 2*seg + 40*page + 17, false, 1, true},
		{"second-to-last page", 2*seg + seg - 2*page + 8, false, 1, true},
		{"last page: the record may run on into the next segment", 2*seg + seg - page + 8, false, 4, false},
		{"a replication slot", 2*seg + 40*page, true, 4, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := t.TempDir()
			must(t, os.MkdirAll(filepath.Join(data, "global"), 0o700))
			must(t, os.MkdirAll(filepath.Join(data, "pg_wal", "archive_status"), 0o700))
			ctl := make([]byte, 8192)
			le := binary.NativeEndian
			le.PutUint32(ctl[8:], 1300)
			le.PutUint32(ctl[16:], dbShutdowned)
			le.PutUint64(ctl[32:], c.lsn)
			le.PutUint64(ctl[40:], c.lsn)
			le.PutUint32(ctl[48:], 1)
			must(t, os.WriteFile(filepath.Join(data, "global", "pg_control"), ctl, 0o600))
			for n := 1; n <= 4; n++ {
				b := bytes.Repeat([]byte{0xAA}, seg)
				le.PutUint32(b[32:], seg)
				le.PutUint32(b[36:], page)
				must(t, os.WriteFile(filepath.Join(data, "pg_wal", segmentFor(1, uint64(n)*seg, seg)), b, 0o600))
			}
			must(t, os.WriteFile(filepath.Join(data, "pg_wal", "00000002.history"), []byte("1\t0/0\tx\n"), 0o600))
			if c.slots {
				must(t, os.MkdirAll(filepath.Join(data, "pg_replslot", "s"), 0o700))
			}
			if err := (&Postgres{}).Seal(context.Background(), engine.StartSpec{DataDir: data}); err != nil {
				t.Fatal(err)
			}
			var segs []string
			entries, _ := os.ReadDir(filepath.Join(data, "pg_wal"))
			for _, e := range entries {
				if segmentName.MatchString(e.Name()) {
					segs = append(segs, e.Name())
				}
			}
			sort.Strings(segs)
			if _, err := os.Stat(filepath.Join(data, "pg_wal", "00000002.history")); err != nil {
				t.Error("a timeline history file was removed")
			}
			if len(segs) != c.wantSegs {
				t.Fatalf("segments left %v, want %d", segs, c.wantSegs)
			}
			keep := segmentFor(1, c.lsn, seg)
			got, err := os.ReadFile(filepath.Join(data, "pg_wal", keep))
			if err != nil {
				t.Fatal(err)
			}
			ckPage := int64(c.lsn%seg) / page * page
			for off := int64(0); off < seg; off += page {
				kept := off == 0 || off == ckPage || off == ckPage+page || !c.punched
				zero := bytes.Count(got[off+64:off+page], []byte{0}) == page-64
				if kept == zero {
					t.Fatalf("page at %d: kept=%v but zero=%v", off, kept, zero)
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
