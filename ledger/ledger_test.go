package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func TestAppendQuery(t *testing.T) {
	l := openTest(t, t.TempDir(), 0)
	base := testBase()
	// Appended out of time order: queries must still come back newest first.
	order := []int{5, 0, 9, 3, 7, 1, 8, 2, 6, 4, 11, 10}
	for _, i := range order {
		rec, uses := genRecord(base, i)
		if err := l.Append(rec, uses); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(recs []*pb.SpendRecord) []string {
		var out []string
		for _, r := range recs {
			out = append(out, r.RequestId)
		}
		return out
	}
	ctx := context.Background()
	tests := []struct {
		name string
		q    Query
		want []string
	}{
		{"all", Query{}, []string{"req-11", "req-10", "req-9", "req-8", "req-7", "req-6", "req-5", "req-4", "req-3", "req-2", "req-1", "req-0"}},
		{"limit", Query{Limit: 3}, []string{"req-11", "req-10", "req-9"}},
		{"key", Query{KeyID: "key-2"}, []string{"req-7", "req-2"}},
		{"team", Query{TeamID: "team-1"}, []string{"req-11", "req-8", "req-6", "req-3", "req-1"}},
		{"key and team", Query{KeyID: "key-1", TeamID: "team-1"}, []string{"req-11", "req-6", "req-1"}},
		{"key and other team", Query{KeyID: "key-1", TeamID: "team-0"}, nil},
		{"since", Query{Since: time.Unix(0, base+8*int64(7*time.Second))}, []string{"req-11", "req-10", "req-9", "req-8"}},
		{"key since limit", Query{KeyID: "key-0", Since: time.Unix(0, base+1), Limit: 1}, []string{"req-10"}},
		{"team since", Query{TeamID: "team-0", Since: time.Unix(0, base+9*int64(7*time.Second))}, []string{"req-10", "req-9"}},
		{"unknown key", Query{KeyID: "nobody"}, nil},
		{"future", Query{Since: time.Now().Add(time.Hour)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := l.Query(ctx, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(recs); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}

	// The stored record is the appended one, field for field.
	recs, err := l.Query(ctx, Query{KeyID: "key-4", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := genRecord(base, 9)
	equalMsgs(t, "record", recs, []*pb.SpendRecord{want})

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Query(cancelled, Query{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled query: err %v, want context.Canceled", err)
	}
	if _, err := l.Query(ctx, Query{KeyID: "a\x00b"}); err == nil {
		t.Error("query with 0x00 in key: no error")
	}
}

func TestAppendRejects(t *testing.T) {
	l := openTest(t, t.TempDir(), 0)
	ok := func() *pb.SpendRecord { return &pb.SpendRecord{UnixNanos: time.Now().UnixNano(), KeyId: "k"} }
	tests := []struct {
		name string
		rec  *pb.SpendRecord
		uses []*pb.BudgetUse
	}{
		{"nil record", nil, nil},
		{"no time", &pb.SpendRecord{KeyId: "k"}, nil},
		{"negative time", &pb.SpendRecord{UnixNanos: -1}, nil},
		{"0x00 in key", &pb.SpendRecord{UnixNanos: 1, KeyId: "a\x00"}, nil},
		{"0x00 in team", &pb.SpendRecord{UnixNanos: 1, TeamId: "\x00"}, nil},
		{"0x00 in model", &pb.SpendRecord{UnixNanos: 1, Model: "m\x00x"}, nil},
		{"nil use", ok(), []*pb.BudgetUse{nil}},
		{"unnamed budget", ok(), []*pb.BudgetUse{{SpentNanos: 1}}},
		{"0x00 in budget", ok(), []*pb.BudgetUse{{Budget: "key:\x00", SpentNanos: 1}}},
		{"negative period", ok(), []*pb.BudgetUse{{Budget: "key:k", PeriodStart: -5, SpentNanos: 1}}},
		{"invalid UTF-8 in budget", ok(), []*pb.BudgetUse{{Budget: "key:\xff", SpentNanos: 1}}},
		{"invalid UTF-8 in key", &pb.SpendRecord{UnixNanos: 1, KeyId: "\xff"}, nil},
	}
	for _, tt := range tests {
		if err := l.Append(tt.rec, tt.uses); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
	if got := queryAll(t, l, Query{}); len(got) != 0 {
		t.Errorf("rejected appends stored %d records", len(got))
	}
	if rep, err := l.NextReport(); rep != nil || err != nil {
		t.Errorf("rejected appends left pending spend: %v, %v", rep, err)
	}
}

// TestConcurrentAppends runs many appending goroutines (under -race in CI):
// every record is stored exactly once and the sums add up.
func TestConcurrentAppends(t *testing.T) {
	const goroutines, each = 32, 100
	l := openTest(t, t.TempDir(), 0)
	base := testBase()
	appendRange(t, l, base, 0, goroutines*each, goroutines)

	recs := queryAll(t, l, Query{})
	if len(recs) != goroutines*each {
		t.Fatalf("got %d records, want %d", len(recs), goroutines*each)
	}
	seen := map[string]bool{}
	for i, r := range recs {
		if seen[r.RequestId] {
			t.Fatalf("record %s twice", r.RequestId)
		}
		seen[r.RequestId] = true
		if i > 0 && recs[i-1].UnixNanos < r.UnixNanos {
			t.Fatalf("not newest first at %d", i)
		}
	}
	wantRollups, wantBudgets := expected(base, 0, goroutines*each)
	equalMsgs(t, "unreported", l.Unreported(), wantBudgets)
	rep, err := l.NextReport()
	if err != nil {
		t.Fatal(err)
	}
	equalReports(t, rep, &Report{Seq: 1, Rollups: wantRollups, Budgets: wantBudgets})
	if n := countKeys(t, l, prefixKeyIndex); n != goroutines*each {
		t.Errorf("%d key index entries, want %d", n, goroutines*each)
	}
}

// TestCloseDrainsAppends closes the ledger while appends are racing it: an
// Append either succeeded, and its record is there after reopening, or
// returned ErrClosed.
func TestCloseDrainsAppends(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir, NodeID: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	base := testBase()
	var (
		mu sync.Mutex
		ok = map[string]bool{}
		wg sync.WaitGroup
	)
	started := make(chan struct{})
	var startOnce sync.Once
	for g := range 16 {
		wg.Go(func() {
			for i := g; ; i += 16 {
				rec, uses := genRecord(base, i)
				err := l.Append(rec, uses)
				startOnce.Do(func() { close(started) })
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ok[rec.RequestId] = true
				mu.Unlock()
			}
		})
	}
	<-started
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if err := l.Append(genRecord(base, 0)); !errors.Is(err, ErrClosed) {
		t.Errorf("append after close: %v", err)
	}
	if _, err := l.NextReport(); !errors.Is(err, ErrClosed) {
		t.Errorf("NextReport after close: %v", err)
	}
	if _, err := l.Query(context.Background(), Query{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Query after close: %v", err)
	}

	l = openTest(t, dir, 0)
	recs := queryAll(t, l, Query{})
	if len(recs) != len(ok) {
		t.Fatalf("reopened: %d records, %d appends succeeded", len(recs), len(ok))
	}
	for _, r := range recs {
		if !ok[r.RequestId] {
			t.Fatalf("record %s stored but its Append failed", r.RequestId)
		}
	}
}

func TestReports(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, 0)
	base := testBase()
	if rep, err := l.NextReport(); rep != nil || err != nil {
		t.Fatalf("empty ledger: NextReport = %v, %v; want nil, nil", rep, err)
	}

	appendRange(t, l, base, 0, 300, 4)
	rollA, budA := expected(base, 0, 300)
	if len(rollA) < 10 {
		t.Fatalf("test data too uniform: %d rollups", len(rollA))
	}
	want1 := &Report{Seq: 1, Rollups: rollA, Budgets: budA}
	rep, err := l.NextReport()
	if err != nil {
		t.Fatal(err)
	}
	equalReports(t, rep, want1)
	again, err := l.NextReport()
	if err != nil {
		t.Fatal(err)
	}
	equalReports(t, again, want1)

	// Spend appended after the cut stays pending, outside report 1.
	appendRange(t, l, base, 300, 500, 4)
	rep, err = l.NextReport()
	if err != nil {
		t.Fatal(err)
	}
	equalReports(t, rep, want1)
	_, budAll := expected(base, 0, 500)
	equalMsgs(t, "unreported", l.Unreported(), budAll)

	// A report survives Close/Open unchanged until acknowledged.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir, 0)
	rep, err = l.NextReport()
	if err != nil {
		t.Fatal(err)
	}
	equalReports(t, rep, want1)
	equalMsgs(t, "unreported after reopen", l.Unreported(), budAll)

	if err := l.AckReport(1); err != nil {
		t.Fatal(err)
	}
	if err := l.AckReport(1); err != nil {
		t.Errorf("second ack of 1: %v", err)
	}
	_, budB := expected(base, 300, 500)
	equalMsgs(t, "unreported after ack", l.Unreported(), budB)
	rollB, _ := expected(base, 300, 500)
	rep, err = l.NextReport()
	if err != nil {
		t.Fatal(err)
	}
	equalReports(t, rep, &Report{Seq: 2, Rollups: rollB, Budgets: budB})
	if err := l.AckReport(99); err == nil {
		t.Error("ack of a seq never cut: no error")
	}
	if err := l.AckReport(2); err != nil {
		t.Fatal(err)
	}
	if rep, err := l.NextReport(); rep != nil || err != nil {
		t.Fatalf("all acknowledged: NextReport = %v, %v; want nil, nil", rep, err)
	}
	if u := l.Unreported(); len(u) != 0 {
		t.Errorf("all acknowledged: unreported %v", u)
	}

	// SetMinSeq: the next cut is above min; a lower min changes nothing.
	l.SetMinSeq(10)
	l.SetMinSeq(5)
	appendRange(t, l, base, 500, 501, 1)
	rep, err = l.NextReport()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Seq != 11 {
		t.Fatalf("after SetMinSeq(10): seq %d, want 11", rep.Seq)
	}
	if err := l.AckReport(11); err != nil {
		t.Fatal(err)
	}
	// The last seq is persisted: after a restart the next cut is 12.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir, 0)
	appendRange(t, l, base, 501, 502, 1)
	rep, err = l.NextReport()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Seq != 12 {
		t.Fatalf("after restart: seq %d, want 12", rep.Seq)
	}
	if rep.Rollups[0].Requests != 1 || len(rep.Rollups) != 1 {
		t.Fatalf("report 12: %v", rep.Rollups)
	}
}

// TestReportUsesNoBudget: a record without budget uses still reports its
// rollup; a use with zero spend is not a row.
func TestReportUsesNoBudget(t *testing.T) {
	l := openTest(t, t.TempDir(), 0)
	now := time.Now().UnixNano()
	if err := l.Append(&pb.SpendRecord{UnixNanos: now, KeyId: "k"}, []*pb.BudgetUse{{Budget: "key:k"}}); err != nil {
		t.Fatal(err)
	}
	rep, err := l.NextReport()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rollups) != 1 || rep.Rollups[0].Requests != 1 || len(rep.Budgets) != 0 {
		t.Fatalf("report %v", rep)
	}
}

func TestRetention(t *testing.T) {
	const retention = 24 * time.Hour
	l := openTest(t, t.TempDir(), retention)
	now := time.Now()
	type entry struct {
		id, key, team string
		age           time.Duration
	}
	entries := []entry{
		{"old-1", "k-old", "t-old", 72 * time.Hour},
		{"old-2", "k-both", "t-both", 48 * time.Hour},
		{"old-3", "k-both", "", 25 * time.Hour},
		{"new-1", "k-both", "t-both", 23 * time.Hour},
		{"new-2", "k-new", "t-both", time.Hour},
		{"new-3", "", "", time.Minute},
	}
	for _, e := range entries {
		rec := &pb.SpendRecord{UnixNanos: now.Add(-e.age).UnixNano(), RequestId: e.id, KeyId: e.key, TeamId: e.team, CostNanos: 5}
		if err := l.Append(rec, []*pb.BudgetUse{{Budget: "key:x", SpentNanos: 5}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // a second run finds nothing more to do
		if err := l.cleanup(now); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(q Query) string {
		var s []string
		for _, r := range queryAll(t, l, q) {
			s = append(s, r.RequestId)
		}
		return fmt.Sprint(s)
	}
	for _, c := range []struct {
		q    Query
		want string
	}{
		{Query{}, "[new-3 new-2 new-1]"},
		{Query{KeyID: "k-both"}, "[new-1]"},
		{Query{KeyID: "k-old"}, "[]"},
		{Query{TeamID: "t-both"}, "[new-2 new-1]"},
		{Query{TeamID: "t-old"}, "[]"},
	} {
		if got := ids(c.q); got != c.want {
			t.Errorf("%+v: got %s, want %s", c.q, got, c.want)
		}
	}
	// The index entries went with their records.
	if n := countKeys(t, l, prefixKeyIndex); n != 2 {
		t.Errorf("%d key index entries left, want 2", n)
	}
	if n := countKeys(t, l, prefixTeamIndex); n != 2 {
		t.Errorf("%d team index entries left, want 2", n)
	}
	// Retention touches raw records only, never unreported spend.
	equalMsgs(t, "unreported", l.Unreported(), []*pb.BudgetUse{{Budget: "key:x", SpentNanos: 30}})
}

// TestQuerySkipsMissingRecords: an index entry whose record is gone is
// skipped, and Limit still counts records returned.
func TestQuerySkipsMissingRecords(t *testing.T) {
	l := openTest(t, t.TempDir(), 0)
	now := time.Now().UnixNano()
	for i := range 4 {
		rec := &pb.SpendRecord{UnixNanos: now + int64(i), RequestId: fmt.Sprint("r", i), KeyId: "k", TeamId: "t"}
		if err := l.Append(rec, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Delete the record of r2 (suffix 3: suffixes count from 1) behind the index's back.
	if err := l.ap.waitApplied(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.db.Delete(appendRecordKey(nil, now+2, 3), writeOpts); err != nil {
		t.Fatal(err)
	}
	for _, q := range []Query{{KeyID: "k", Limit: 2}, {TeamID: "t", Limit: 2}} {
		recs, err := l.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 2 || recs[0].RequestId != "r3" || recs[1].RequestId != "r1" {
			t.Errorf("%+v: got %v", q, recs)
		}
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{NodeID: "n"},
		{Dir: t.TempDir()},
		{Dir: t.TempDir(), NodeID: "n", Retention: -time.Hour},
	} {
		if l, err := Open(cfg); err == nil {
			l.Close()
			t.Errorf("Open(%+v): no error", cfg)
		}
	}
}
