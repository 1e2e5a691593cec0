package mysql

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
)

// Transaction ids. Besides its LSN, a page a build wrote holds the ids of
// the transactions that wrote it: every clustered-index record its
// inserting transaction's DB_TRX_ID and DB_ROLL_PTR, every secondary-index
// leaf page the highest of them (PAGE_MAX_TRX_ID). Ids are handed out by
// one counter that background work (statistics updates) also draws from,
// so two builds of the same recipe numbered the same rows differently.
// InnoDB's own purge resets a record to DB_TRX_ID 0 and DB_ROLL_PTR
// "inserted, no history" once no reader can need its history — but not
// for rows a bulk insert into an empty table wrote. After the seal's slow
// shutdown no transaction is active and no history is left, so the seal
// does what purge would: records get the reset values, and secondary
// leaf pages the smallest valid PAGE_MAX_TRX_ID (1: every row on the page
// is visible to every reader, and none is locked).
//
// Finding DB_TRX_ID in a record needs the clustered index's key length,
// which the page does not hold: the seal asks the server (rowLayouts)
// and handles tables whose primary key columns all have a fixed length
// (integers, floats, dates and times, BINARY) in COMPACT or DYNAMIC rows.
// Other tables keep their ids; their pages still get stamped LSNs.

// rowLayout is what resetting a table's transaction ids needs to know.
type rowLayout struct {
	space  uint32 // the tablespace id page 0 must carry
	index  uint64 // the clustered index's id
	keyLen int    // bytes of the primary key before DB_TRX_ID
	maxTrx uint64 // the server's next transaction id: no record may hold one as large
}

const (
	filPageSpaceID = 34
	filPageType    = 24
	pageTypeIndex  = 17855 // FIL_PAGE_INDEX
	pageHeader     = 38
	pageFree       = pageHeader + 6
	pageNHeap      = pageHeader + 4
	pageNRecs      = pageHeader + 16
	pageMaxTrxID   = pageHeader + 18
	pageLevel      = pageHeader + 26
	pageIndexID    = pageHeader + 28
	infimumOrigin  = 99  // PAGE_NEW_INFIMUM
	supremumOrigin = 112 // PAGE_NEW_SUPREMUM
	firstRecord    = 125 // PAGE_NEW_SUPREMUM_END + REC_N_NEW_EXTRA_BYTES
	trxRollLen     = 13  // DB_TRX_ID (6) + DB_ROLL_PTR (7)
)

// resetTrxRoll is what purge writes into a record whose history is gone.
var resetTrxRoll = [trxRollLen]byte{6: 0x80}

// fixedKeyTypes are InnoDB's main types whose values have one length in
// COMPACT records: DATA_FIXBINARY, DATA_INT, DATA_FLOAT, DATA_DOUBLE.
var fixedKeyTypes = map[int]bool{3: true, 6: true, 9: true, 10: true}

// rowLayouts asks a running server for the clustered-index layout of every
// file-per-table table whose ids can be reset, keyed by data-dir-relative
// .ibd path.
func rowLayouts(ctx context.Context, db *sql.DB) (map[string]rowLayout, error) {
	// A transaction still open — an XA transaction PREPAREd by the
	// recipe survives the slow shutdown — owns rows that must stay
	// invisible and locked: its ids cannot be reset.
	var open int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX").Scan(&open); err != nil {
		return nil, fmt.Errorf("read open transactions: %w", err)
	}
	if open == 0 {
		rows, err := db.QueryContext(ctx, "XA RECOVER")
		if err != nil {
			return nil, fmt.Errorf("read prepared XA transactions: %w", err)
		}
		for rows.Next() {
			open++
		}
		rows.Close()
	}
	if open > 0 {
		return nil, fmt.Errorf("%d transactions still open (prepared XA?)", open)
	}
	maxTrx, err := nextTrxID(ctx, db)
	if err != nil {
		return nil, err
	}
	prefixed, err := prefixKeys(ctx, db)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, `
SELECT t.NAME, t.SPACE, i.INDEX_ID, i.NAME, c.MTYPE, c.LEN
FROM information_schema.INNODB_SYS_TABLES t
JOIN information_schema.INNODB_SYS_INDEXES i ON i.TABLE_ID = t.TABLE_ID AND i.TYPE & 1 = 1
JOIN information_schema.INNODB_SYS_FIELDS f ON f.INDEX_ID = i.INDEX_ID
JOIN information_schema.INNODB_SYS_COLUMNS c ON c.TABLE_ID = t.TABLE_ID AND c.NAME = f.NAME
WHERE t.SPACE <> 0 AND t.ROW_FORMAT IN ('Compact', 'Dynamic')
ORDER BY t.NAME, f.POS`)
	if err != nil {
		return nil, fmt.Errorf("read clustered index layouts: %w", err)
	}
	defer rows.Close()
	out := map[string]rowLayout{}
	unfit := map[string]bool{}
	for rows.Next() {
		var name, idxName string
		var space uint32
		var index uint64
		var mtype, length int
		if err := rows.Scan(&name, &space, &index, &idxName, &mtype, &length); err != nil {
			return nil, fmt.Errorf("read clustered index layouts: %w", err)
		}
		path := filepath.FromSlash(name) + ".ibd"
		// A key column indexed by a prefix is stored as the prefix: its
		// length in the record is not the column's. Table names that
		// information_schema spells otherwise (encoded characters) are
		// taken on trust only for types that cannot have a prefix.
		plain := plainName.MatchString(name)
		if !fixedKeyTypes[mtype] || length <= 0 || prefixed[name+"/"+idxName] || (mtype == 3 && !plain) {
			unfit[path] = true
		}
		l := out[path]
		l.space, l.index, l.maxTrx = space, index, maxTrx
		l.keyLen += length
		out[path] = l
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read clustered index layouts: %w", err)
	}
	for p := range unfit {
		delete(out, p)
	}
	return out, nil
}

var (
	trxCounter = regexp.MustCompile(`(?m)^Trx id counter (\d+)`)
	plainName  = regexp.MustCompile(`^[A-Za-z0-9_]+/[A-Za-z0-9_]+$`)
)

// prefixKeys names the indexes ("db/table/index") with a column indexed by
// a prefix.
func prefixKeys(ctx context.Context, db *sql.DB) (map[string]bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT DISTINCT CONCAT(TABLE_SCHEMA, '/', TABLE_NAME, '/', INDEX_NAME) FROM information_schema.STATISTICS WHERE SUB_PART IS NOT NULL")
	if err != nil {
		return nil, fmt.Errorf("read prefix indexes: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("read prefix indexes: %w", err)
		}
		out[k] = true
	}
	return out, rows.Err()
}

// nextTrxID reads the transaction id InnoDB hands out next.
func nextTrxID(ctx context.Context, db *sql.DB) (uint64, error) {
	var typ, name, status string
	if err := db.QueryRowContext(ctx, "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		return 0, fmt.Errorf("read InnoDB status: %w", err)
	}
	m := trxCounter.FindStringSubmatch(status)
	if m == nil {
		return 0, fmt.Errorf("InnoDB status names no transaction id counter")
	}
	n, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read transaction id counter: %w", err)
	}
	return n, nil
}

// resetPageTrx resets the transaction ids of one valid page of a table
// laid out as l: the records of a clustered-index leaf page, the
// PAGE_MAX_TRX_ID of a secondary-index leaf page. A page it cannot walk
// with certainty (another format, a record that is not where the page
// header says, an id out of range, a delete-marked or metadata record)
// is left exactly as it was. It reports whether it changed the page.
func resetPageTrx(pg []byte, l rowLayout) bool {
	be := binary.BigEndian
	if be.Uint16(pg[filPageType:]) != pageTypeIndex || be.Uint16(pg[pageNHeap:])&0x8000 == 0 || be.Uint16(pg[pageLevel:]) != 0 {
		return false // not a COMPACT leaf page
	}
	if be.Uint64(pg[pageIndexID:]) != l.index {
		max := be.Uint64(pg[pageMaxTrxID:])
		if max <= 1 || max >= l.maxTrx {
			return false
		}
		be.PutUint64(pg[pageMaxTrxID:], 1)
		return true
	}
	origins, ok := leafRecords(pg, l.keyLen)
	if !ok {
		return false
	}
	garbage, ok := freeRecords(pg, l.keyLen)
	if !ok {
		return false
	}
	changed := false
	for _, o := range origins {
		f := pg[o+l.keyLen : o+l.keyLen+trxRollLen]
		if [trxRollLen]byte(f) == resetTrxRoll {
			continue
		}
		// After a slow shutdown a record that purge did not reset was
		// written by an insert (DB_ROLL_PTR's insert flag) of a transaction
		// below the counter; anything else means the walk misread it.
		if trx := uint64(be.Uint16(f))<<32 | uint64(be.Uint32(f[2:])); trx == 0 || trx >= l.maxTrx || f[6]&0x80 == 0 {
			return false
		}
	}
	for _, o := range append(origins, garbage...) {
		f := pg[o+l.keyLen : o+l.keyLen+trxRollLen]
		if [trxRollLen]byte(f) != resetTrxRoll {
			copy(f, resetTrxRoll[:])
			changed = true
		}
	}
	return changed
}

// leafRecords walks a COMPACT leaf page's record list from the infimum to
// the supremum and returns the origins of its user records, checking
// that the list holds exactly PAGE_N_RECS ordinary records, each with
// room for its key and system columns. ok is false if anything is off,
// or a record is delete-marked or the metadata record of an instant
// ALTER TABLE.
func leafRecords(pg []byte, keyLen int) (origins []int, ok bool) {
	be := binary.BigEndian
	n := int(be.Uint16(pg[pageNRecs:]))
	o := infimumOrigin
	for i := 0; ; i++ {
		next := int(int16(be.Uint16(pg[o-2:])))
		if next == 0 || i > n {
			return nil, false
		}
		o = (o + next) & (pageSize - 1)
		if o == supremumOrigin {
			break
		}
		if o < firstRecord || o+keyLen+trxRollLen > pageSize-8 {
			return nil, false
		}
		if pg[o-3]&7 != 0 || pg[o-5]&0x30 != 0 { // status ordinary; neither deleted nor min_rec
			return nil, false
		}
		origins = append(origins, o)
	}
	return origins, len(origins) == n
}

// freeRecords returns the origins of the records on a COMPACT page's free
// list (PAGE_FREE): records removed from the page whose bytes stay until
// the space is reused, with the transaction ids of their time. Nothing
// reads those fields again, and resetting them too keeps pages of two
// builds alike. ok is false if the list is not well formed.
func freeRecords(pg []byte, keyLen int) (origins []int, ok bool) {
	be := binary.BigEndian
	heap := int(be.Uint16(pg[pageNHeap:]) & 0x7fff)
	o := int(be.Uint16(pg[pageFree:]))
	for o != 0 {
		if len(origins) >= heap || o < firstRecord || o+keyLen+trxRollLen > pageSize-8 || pg[o-3]&7 != 0 {
			return nil, false
		}
		origins = append(origins, o)
		next := int(int16(be.Uint16(pg[o-2:])))
		if next == 0 {
			break
		}
		o = (o + next) & (pageSize - 1)
	}
	return origins, true
}
