package mysql

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// leafPage lays out a COMPACT clustered-index leaf page of index 7 with
// the given transaction ids (4-byte keys, 20 bytes of other columns) and
// one freed record holding trx 9 on PAGE_FREE.
func leafPage(trxs ...uint64) []byte {
	be := binary.BigEndian
	pg := make([]byte, pageSize)
	be.PutUint16(pg[filPageType:], pageTypeIndex)
	be.PutUint64(pg[pageIndexID:], 7)
	const recLen = 5 + 4 + trxRollLen + 20 // header + key + system columns + the rest
	origin := func(i int) int { return firstRecord + i*recLen }
	n := len(trxs)
	be.PutUint16(pg[pageNHeap:], 0x8000|uint16(n+3))
	be.PutUint16(pg[pageNRecs:], uint16(n))
	link := func(from, to int) { be.PutUint16(pg[from-2:], uint16(int16(to-from))) }
	prev := infimumOrigin
	for i, trx := range trxs {
		o := origin(i)
		be.PutUint32(pg[o:], 0x80000000|uint32(i+1))
		be.PutUint16(pg[o+4:], uint16(trx>>32))
		be.PutUint32(pg[o+6:], uint32(trx))
		pg[o+10] = 0x8b // insert flag, rollback segment 11
		link(prev, o)
		prev = o
	}
	link(prev, supremumOrigin)
	free := origin(n)
	be.PutUint32(pg[free+6:], 9)
	pg[free-5] = 0x20 // delete-marked, as freed records are
	be.PutUint16(pg[pageFree:], uint16(free))
	return pg
}

func TestResetPageTrx(t *testing.T) {
	l := rowLayout{index: 7, keyLen: 4, maxTrx: 100}
	pg := leafPage(33, 33, 34)
	if !resetPageTrx(pg, l) {
		t.Fatal("a clustered leaf page was not reset")
	}
	origins, ok := leafRecords(pg, 4)
	garbage, _ := freeRecords(pg, 4)
	if !ok || len(origins) != 3 || len(garbage) != 1 {
		t.Fatalf("walk after reset: %d records (%v), %d freed", len(origins), ok, len(garbage))
	}
	for _, o := range append(origins, garbage...) {
		if !bytes.Equal(pg[o+4:o+4+trxRollLen], resetTrxRoll[:]) {
			t.Fatalf("record at %d: %x, want the reset DB_TRX_ID/DB_ROLL_PTR", o, pg[o+4:o+4+trxRollLen])
		}
	}
	if resetPageTrx(pg, l) {
		t.Fatal("a reset page was reset again")
	}

	miscount := leafPage(33, 34)
	binary.BigEndian.PutUint16(miscount[pageNRecs:], 3)
	deleted := leafPage(33, 34)
	deleted[firstRecord-5] = 0x20
	updated := leafPage(33, 34)
	updated[firstRecord+4+6] = 0x0b // DB_ROLL_PTR without the insert flag: history purge would have reset
	for name, p := range map[string][]byte{
		"id not below the counter": leafPage(33, 100),
		"PAGE_N_RECS not matching": miscount,
		"a delete-marked record":   deleted,
		"another index": func() []byte {
			p := leafPage(33)
			binary.BigEndian.PutUint64(p[pageIndexID:], 8)
			p[pageMaxTrxID+7] = 0
			return p
		}(),
		"not a leaf":       func() []byte { p := leafPage(33); p[pageLevel+1] = 1; return p }(),
		"REDUNDANT format": func() []byte { p := leafPage(33); p[pageNHeap] &^= 0x80; return p }(),
	} {
		before := bytes.Clone(p)
		if resetPageTrx(p, l) || !bytes.Equal(before, p) {
			t.Errorf("%s: page changed", name)
		}
	}

	// A secondary-index leaf page: PAGE_MAX_TRX_ID goes down to 1.
	sec := leafPage()
	binary.BigEndian.PutUint64(sec[pageIndexID:], 8)
	binary.BigEndian.PutUint64(sec[pageMaxTrxID:], 42)
	if !resetPageTrx(sec, l) || binary.BigEndian.Uint64(sec[pageMaxTrxID:]) != 1 {
		t.Fatalf("secondary leaf page: PAGE_MAX_TRX_ID %d, want 1", binary.BigEndian.Uint64(sec[pageMaxTrxID:]))
	}
	binary.BigEndian.PutUint64(sec[pageMaxTrxID:], 100)
	if resetPageTrx(sec, l) {
		t.Fatal("a PAGE_MAX_TRX_ID not below the counter was changed")
	}
}
