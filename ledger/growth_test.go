package ledger

import (
	"context"
	"testing"
)

// settle writes out everything appended and compacts the whole ledger, so that what a
// query reads depends on the ledger's size and not on how far compactions got.
func settle(t *testing.T, l *Ledger) {
	t.Helper()
	if err := l.ap.waitApplied(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
}

// blocksPerQuery is how many blocks (from the cache or from disk) one query reads, on
// average over a few.
func blocksPerQuery(t *testing.T, l *Ledger, q Query) float64 {
	t.Helper()
	const rounds = 20
	before := blocksRead(l)
	for range rounds {
		recs, err := l.Query(context.Background(), q)
		if err != nil || len(recs) != q.Limit {
			t.Fatalf("query %+v: %d records, %v", q, len(recs), err)
		}
	}
	return float64(blocksRead(l)-before) / rounds
}

// blocksRead counts the blocks the ledger has read so far, from the cache or from disk.
func blocksRead(l *Ledger) int64 {
	m := l.db.Metrics()
	return m.BlockCache.Hits + m.BlockCache.Misses
}

// The short form of TestLargeLedger, run by every go test, without timings: a query for
// the newest records, or for one key's or one team's, reads at most a few blocks per
// record it returns, in a small ledger and in one ten times larger. A query that scanned
// the ledger would read hundreds of blocks at the larger size.
func TestQueryReadsAreBoundedByTheLimitNotTheLedger(t *testing.T) {
	const small, large = 1_000, 10_000
	l := openTest(t, t.TempDir(), 0)
	// key-7 has 5 records in the first 1,000, team-3 has 50.
	queries := []Query{{Limit: 20}, {KeyID: "key-7", Limit: 5}, {TeamID: "team-3", Limit: 50}}
	check := func(size int) {
		for _, q := range queries {
			got := blocksPerQuery(t, l, q)
			t.Logf("%d records: query %+v reads %.1f blocks", size, q, got)
			if limit := float64(3*q.Limit + 10); got > limit {
				t.Errorf("%d records: query %+v reads %.1f blocks, more than %.0f: it scans the ledger", size, q, got, limit)
			}
		}
	}
	fill(t, l, 0, small)
	settle(t, l)
	check(small)
	fill(t, l, small, large)
	settle(t, l)
	check(large)
	// The bound must be well below what reading every record costs, or the test could not
	// tell a scan from a lookup.
	before := blocksRead(l)
	if n := countKeys(t, l, prefixRecord); n != large {
		t.Errorf("%d records stored, want %d", n, large)
	}
	scan := blocksRead(l) - before
	for _, q := range queries {
		if bound := int64(3*q.Limit + 10); 2*bound > scan {
			t.Errorf("query %+v: the bound of %d blocks is not well below a full scan's %d", q, bound, scan)
		}
	}
}
