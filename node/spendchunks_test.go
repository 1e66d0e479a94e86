package node

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate/tollgate/ledger"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// A report splits into chunks of at most the cap, rollups first, with
// consecutive seqs from the report's; an empty report is one chunk.
func TestReportChunksCapItemsWithConsecutiveSeqs(t *testing.T) {
	rep := &ledger.Report{Seq: 41}
	for i := range 5 {
		rep.Rollups = append(rep.Rollups, &pb.SpendRollup{KeyId: fmt.Sprint("k", i)})
	}
	for i := range 4 {
		rep.Budgets = append(rep.Budgets, &pb.BudgetUse{Budget: fmt.Sprint("b", i)})
	}
	chunks := reportChunks("n1", rep, 4)
	want := [][2]int{{4, 0}, {1, 3}, {0, 1}}
	if len(chunks) != len(want) {
		t.Fatalf("%d chunks, want %d", len(chunks), len(want))
	}
	for i, c := range chunks {
		if c.GetSeq() != 41+uint64(i) || c.GetNode() != "n1" {
			t.Errorf("chunk %d: node %q seq %d, want n1 %d", i, c.GetNode(), c.GetSeq(), 41+i)
		}
		if got := [2]int{len(c.GetRollups()), len(c.GetBudgets())}; got != want[i] {
			t.Errorf("chunk %d: %v rollups/budgets, want %v", i, got, want[i])
		}
	}
	if c := reportChunks("n1", &ledger.Report{Seq: 7}, 4); len(c) != 1 || c[0].GetSeq() != 7 {
		t.Errorf("empty report: %v", c)
	}
}

// openSoloStore starts a single-voter Raft store and waits until it leads.
func openSoloStore(t *testing.T) *raftstore.Store {
	t.Helper()
	s, err := raftstore.Open(raftstore.Config{
		Dir: t.TempDir(), NodeID: "raft1", BindAddr: "127.0.0.1:0", Bootstrap: true, LogLevel: "error",
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// More pending spend than one report may carry goes as several spend
// report entries, none over raftstore.MaxSpendReportItems; a chunk whose
// answer was lost is not counted twice when the report is resent, and the
// next report's seq comes after the last chunk's (else the state machine
// would drop it as a replay).
func TestLargePendingSpendGoesInCappedChunksCountedOnce(t *testing.T) {
	s := openSoloStore(t)
	l, err := ledger.Open(ledger.Config{Dir: filepath.Join(t.TempDir(), "ledger"), NodeID: "n1", Logger: slog.Default()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	const keys = 2100 // rollups, and as many budget uses: 4200 items
	now := time.Now()
	var want int64
	for i := range keys {
		cost := int64(i + 1)
		want += cost
		rec := &pb.SpendRecord{UnixNanos: now.UnixNano(), RequestId: fmt.Sprint("r", i), Node: "n1",
			KeyId: fmt.Sprintf("k%04d", i), Model: "m", CostNanos: cost}
		if err := l.Append(rec, []*pb.BudgetUse{{Budget: raftstore.KeyBudgetID(rec.KeyId), SpentNanos: cost}}); err != nil {
			t.Fatal(err)
		}
	}

	var sizes []int
	calls, failAt := 0, 2
	var reported int64
	sink := reportSink{node: "n1", ledger: l, state: s.State, log: slog.Default(),
		propose: func(ctx context.Context, cmd *pb.Command) error {
			calls++
			c := cmd.GetSpendReport()
			sizes = append(sizes, len(c.GetRollups())+len(c.GetBudgets()))
			if _, err := s.Apply(ctx, cmd); err != nil {
				return err
			}
			if calls == failAt {
				return fmt.Errorf("propose: answer lost: %w", raftstore.ErrNotLeader)
			}
			return nil
		},
		reported: func(uses []*pb.BudgetUse) {
			for _, u := range uses {
				reported += u.GetSpentNanos()
			}
		}}
	ctx := context.Background()
	flushReports(ctx, sink)
	if reported != 0 || calls != 2 {
		t.Fatalf("after a failed chunk: %d proposals, %d reported; want 2 and nothing", calls, reported)
	}
	if len(l.Unreported()) != keys {
		t.Fatalf("the report was acknowledged with a chunk failed: %d budget periods unreported", len(l.Unreported()))
	}
	if n := flushReports(ctx, sink); n < 200*10 {
		t.Errorf("flush reports %d bytes applied for the last chunk's 200 budget uses", n)
	}
	if calls != 3 {
		t.Errorf("%d proposals, want 3: the resent report's applied chunks were proposed again", calls)
	}
	for i, n := range sizes {
		if n > raftstore.MaxSpendReportItems {
			t.Errorf("spend report entry %d carries %d items, more than %d", i, n, raftstore.MaxSpendReportItems)
		}
	}
	if reported != want || len(l.Unreported()) != 0 {
		t.Fatalf("reported %d of %d; %d periods left unreported", reported, want, len(l.Unreported()))
	}

	st := s.State()
	var got, rows int64
	st.WalkRollups(0, now.Unix()+3600, func(r *pb.SpendRollup) bool {
		got += r.GetCostNanos()
		rows++
		return true
	})
	if got != want || rows != keys {
		t.Fatalf("state counts %d in %d rollups, want %d in %d", got, rows, want, keys)
	}
	for i := range keys {
		id := raftstore.KeyBudgetID(fmt.Sprintf("k%04d", i))
		if bp := st.BudgetPeriod(id, 0); bp.GetSpentNanos() != int64(i+1) {
			t.Fatalf("budget %s spent %d, want %d", id, bp.GetSpentNanos(), i+1)
		}
	}

	// The next report is counted: its seq is above the last chunk's.
	last := st.NodeSeq("n1")
	if err := l.Append(&pb.SpendRecord{UnixNanos: now.UnixNano(), RequestId: "late", Node: "n1", KeyId: "k0000",
		Model: "m", CostNanos: 1000}, []*pb.BudgetUse{{Budget: raftstore.KeyBudgetID("k0000"), SpentNanos: 1000}}); err != nil {
		t.Fatal(err)
	}
	flushReports(ctx, sink)
	if seq := s.State().NodeSeq("n1"); seq != last+1 {
		t.Fatalf("next report applied as seq %d, want %d", seq, last+1)
	}
	if bp := s.State().BudgetPeriod(raftstore.KeyBudgetID("k0000"), 0); bp.GetSpentNanos() != 1001 {
		t.Fatalf("the report after a chunked one was not counted: spent %d, want 1001", bp.GetSpentNanos())
	}
}

// Spend that arrives while a report is on its way waits for the next
// flush: under steady traffic a flush sends at most two reports, instead
// of cutting and sending reports back to back for as long as traffic lasts.
func TestFlushUnderSteadyTrafficSendsAtMostTwoReports(t *testing.T) {
	s := openSoloStore(t)
	l, err := ledger.Open(ledger.Config{Dir: filepath.Join(t.TempDir(), "ledger"), NodeID: "n1", Logger: slog.Default()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	appended := 0
	appendOne := func() {
		appended++
		if err := l.Append(&pb.SpendRecord{UnixNanos: time.Now().UnixNano(), RequestId: fmt.Sprint("r", appended), Node: "n1",
			KeyId: "k1", Model: "m", CostNanos: 1}, nil); err != nil {
			t.Fatal(err)
		}
	}
	appendOne()
	reports := 0
	sink := reportSink{node: "n1", ledger: l, state: s.State, log: slog.Default(), reported: func([]*pb.BudgetUse) {},
		propose: func(ctx context.Context, cmd *pb.Command) error {
			reports++
			appendOne() // a request finished meanwhile
			_, err := s.Apply(ctx, cmd)
			return err
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	flushReports(ctx, sink)
	if reports != maxReportsPerFlush {
		t.Fatalf("one flush under steady traffic sent %d reports, want %d", reports, maxReportsPerFlush)
	}
	// What arrived during the flush goes with the next one.
	flushReports(ctx, sink)
	var got int64
	s.State().WalkRollups(0, time.Now().Unix()+3600, func(r *pb.SpendRollup) bool { got += r.GetRequests(); return true })
	if got != int64(appended-1) {
		t.Fatalf("state counts %d requests, want %d (all but the one appended during the last report)", got, appended-1)
	}
}

// The pause after a flush grows with what it wrote to the Raft log, so
// that spend reports write at most spendLogRate per minute on average,
// and is bounded; small reports keep the 2 s ticker's pace.
func TestReportPauseKeepsReportsUnderTheLogRate(t *testing.T) {
	if p := reportPause(0); p != 0 {
		t.Errorf("pause after nothing sent: %v", p)
	}
	if p := reportPause(2_000); p >= spendReportInterval {
		t.Errorf("pause after a 2 KB report: %v, want less than the %v tick", p, spendReportInterval)
	}
	if p := reportPause(spendLogRate / 2); p != 30*time.Second {
		t.Errorf("pause after half a minute's bytes: %v, want 30s", p)
	}
	if p := reportPause(100 << 20); p != maxReportPause {
		t.Errorf("pause after 100 MB: %v, want the bound %v", p, maxReportPause)
	}
}
