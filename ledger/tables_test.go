package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// mixedTables lists the sstables whose keys are not all raw records nor all
// other keys: a table that spans the start or the end of the records.
func mixedTables(t *testing.T, l *Ledger) []string {
	t.Helper()
	levels, err := l.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	var mixed []string
	for lvl, tables := range levels {
		for _, tab := range tables {
			lo, hi := tab.Smallest.UserKey, tab.Largest.UserKey
			inRecords := func(k []byte) bool { return len(k) > 0 && k[0] == prefixRecord }
			if inRecords(lo) != inRecords(hi) || (lo[0] < prefixRecord && hi[0] > prefixRecord) {
				mixed = append(mixed, fmt.Sprintf("L%d %s: %q..%q", lvl, tab.FileNum, lo, hi))
			}
		}
	}
	return mixed
}

// Flushes and compactions end their tables at the start and at the end of
// the raw records (recordSpans), so that the time-ordered record tables are
// not rewritten with the index entries and pending rows. Retention's range
// deletions and a restart leave every record where queries find it.
func TestRecordsNeverShareATableWithOtherKeys(t *testing.T) {
	dir := t.TempDir()
	base := testBase()
	const n = 20_000 // several 2 MiB memtables
	l := openTest(t, dir, 12*time.Hour)
	appendRange(t, l, base, 0, n, 8)
	if err := l.ap.waitApplied(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if m := mixedTables(t, l); len(m) > 0 {
		t.Fatalf("after the flushes, tables hold records and other keys: %v", m)
	}
	newestOfKey := func(l *Ledger) []*pb.SpendRecord {
		recs, err := l.Query(context.Background(), Query{KeyID: "key-3", Limit: 50})
		if err != nil || len(recs) != 50 {
			t.Fatalf("query key-3: %d records, %v", len(recs), err)
		}
		return recs
	}
	before := newestOfKey(l)

	// Retention at a time when the first records (7 s apart) are too old.
	now := time.Unix(0, base).Add(12*time.Hour + 7000*7*time.Second)
	if err := l.cleanup(now); err != nil {
		t.Fatal(err)
	}
	settle(t, l) // compacts the whole ledger
	if m := mixedTables(t, l); len(m) > 0 {
		t.Fatalf("after a full compaction, tables hold records and other keys: %v", m)
	}
	if got := countKeys(t, l, prefixRecord); got != n-7000 {
		t.Fatalf("%d records after retention, want %d", got, n-7000)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openTest(t, dir, 12*time.Hour)
	if got := countKeys(t, l, prefixRecord); got != n-7000 {
		t.Fatalf("%d records after a restart, want %d", got, n-7000)
	}
	equalMsgs(t, "newest records of key-3 after a restart", newestOfKey(l), before)
	recs := queryAll(t, l, Query{})
	if len(recs) != maxLimit || recs[0].RequestId != fmt.Sprintf("req-%d", n-1) {
		t.Fatalf("after a restart: %d records, newest %q", len(recs), recs[0].GetRequestId())
	}
}

// A ledger whose tables were written with bloom filters (by an older
// Tollgate) opens and answers queries as before.
func TestOpensTablesWrittenWithBloomFilters(t *testing.T) {
	dir := t.TempDir()
	base := testBase()
	l := openTest(t, dir, 0)
	appendRange(t, l, base, 0, 500, 4)
	want := queryAll(t, l, Query{KeyID: "key-2"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Rewrite every table as the older options did: bloom filters, one
	// table across records and other keys.
	opts := pebbleOptions(baseFS, slog.New(slog.DiscardHandler))
	opts.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	opts.Experimental.SpanPolicyFunc = nil
	db, err := pebble.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	l = openTest(t, dir, 0)
	equalMsgs(t, "records of key-2", queryAll(t, l, Query{KeyID: "key-2"}), want)
	if got := countKeys(t, l, prefixRecord); got != 500 {
		t.Fatalf("%d records, want 500", got)
	}
}
