package ledger

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// openTest opens a ledger in dir that is closed when the test ends; warnings
// go to the test log.
func openTest(t testing.TB, dir string, retention time.Duration) *Ledger {
	t.Helper()
	l, err := Open(Config{
		Dir:       dir,
		NodeID:    "node-1",
		Retention: retention,
		Logger:    slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return l
}

// testBase is a start time for generated records: a few hours ago, on no
// particular boundary, so that records span several hours.
func testBase() int64 {
	return time.Now().Add(-6*time.Hour).UnixNano() - 1234567
}

var models = []string{"gpt-4o", "claude-sonnet", "llama-70b"}

// genRecord returns the i-th generated record and its budget uses.
func genRecord(base int64, i int) (*pb.SpendRecord, []*pb.BudgetUse) {
	key := fmt.Sprintf("key-%d", i%5)
	team := fmt.Sprintf("team-%d", i%5%2)
	rec := &pb.SpendRecord{
		UnixNanos:        base + int64(i)*int64(7*time.Second),
		RequestId:        fmt.Sprintf("req-%d", i),
		Node:             "node-1",
		KeyId:            key,
		TeamId:           team,
		Model:            models[i%len(models)],
		Deployment:       "dep-" + models[i%len(models)],
		Provider:         "openai",
		Endpoint:         "/v1/chat/completions",
		Stream:           i%2 == 0,
		PromptTokens:     int64(i%100 + 1),
		CompletionTokens: int64(i % 50),
		CachedTokens:     int64(i % 7),
		CostNanos:        int64(1000 * (i%13 + 1)),
		Unpriced:         i%11 == 0,
		Status:           200,
		LatencyMicros:    int64(1000 + i),
		TtftMicros:       int64(100 + i),
		Attempts:         1,
	}
	if rec.Unpriced {
		rec.CostNanos = 0
	}
	if i%4 == 3 {
		return rec, nil
	}
	day := rec.UnixNanos / 1e9
	day -= day % 86400
	return rec, []*pb.BudgetUse{
		{Budget: "key:" + key, PeriodStart: day, SpentNanos: rec.CostNanos + 1},
		{Budget: "team:" + team, PeriodStart: 0, SpentNanos: rec.CostNanos + 2},
	}
}

// appendRange appends records [from, to) from workers goroutines.
func appendRange(t testing.TB, l *Ledger, base int64, from, to, workers int) {
	t.Helper()
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			var err error
			for i := from + w; i < to && err == nil; i += workers {
				rec, uses := genRecord(base, i)
				err = l.Append(rec, uses)
			}
			errs <- err
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// expected computes, independently of the ledger, the rollups and budget
// sums of records [from, to).
func expected(base int64, from, to int) ([]*pb.SpendRollup, []*pb.BudgetUse) {
	type rk struct {
		hour             int64
		key, team, model string
	}
	type bk struct {
		budget string
		period int64
	}
	rollups := map[rk]*pb.SpendRollup{}
	budgets := map[bk]*pb.BudgetUse{}
	for i := from; i < to; i++ {
		rec, uses := genRecord(base, i)
		hour := time.Unix(0, rec.UnixNanos).UTC().Truncate(time.Hour).Unix()
		k := rk{hour, rec.KeyId, rec.TeamId, rec.Model}
		r := rollups[k]
		if r == nil {
			r = &pb.SpendRollup{HourUnix: hour, KeyId: rec.KeyId, TeamId: rec.TeamId, Model: rec.Model}
			rollups[k] = r
		}
		r.Requests++
		r.PromptTokens += rec.PromptTokens
		r.CompletionTokens += rec.CompletionTokens
		r.CachedTokens += rec.CachedTokens
		r.CostNanos += rec.CostNanos
		if rec.Unpriced {
			r.UnpricedRequests++
		}
		for _, u := range uses {
			b := budgets[bk{u.Budget, u.PeriodStart}]
			if b == nil {
				b = &pb.BudgetUse{Budget: u.Budget, PeriodStart: u.PeriodStart}
				budgets[bk{u.Budget, u.PeriodStart}] = b
			}
			b.SpentNanos += u.SpentNanos
		}
	}
	rs := make([]*pb.SpendRollup, 0, len(rollups))
	for _, r := range rollups {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b *pb.SpendRollup) int {
		return cmp.Or(cmp.Compare(a.HourUnix, b.HourUnix), cmp.Compare(a.KeyId, b.KeyId),
			cmp.Compare(a.TeamId, b.TeamId), cmp.Compare(a.Model, b.Model))
	})
	bs := make([]*pb.BudgetUse, 0, len(budgets))
	for _, b := range budgets {
		bs = append(bs, b)
	}
	slices.SortFunc(bs, func(a, b *pb.BudgetUse) int {
		return cmp.Or(cmp.Compare(a.Budget, b.Budget), cmp.Compare(a.PeriodStart, b.PeriodStart))
	})
	return rs, bs
}

func equalMsgs[M proto.Message](t testing.TB, what string, got, want []M) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d entries, want %d\ngot  %v\nwant %v", what, len(got), len(want), got, want)
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("%s[%d]: got %v, want %v", what, i, got[i], want[i])
		}
	}
}

func equalReports(t testing.TB, got, want *Report) {
	t.Helper()
	if got == nil || want == nil {
		t.Fatalf("report: got %v, want %v", got, want)
	}
	if got.Seq != want.Seq {
		t.Fatalf("report seq: got %d, want %d", got.Seq, want.Seq)
	}
	equalMsgs(t, "rollups", got.Rollups, want.Rollups)
	equalMsgs(t, "budgets", got.Budgets, want.Budgets)
}

// queryAll returns every record (up to maxLimit).
func queryAll(t testing.TB, l *Ledger, q Query) []*pb.SpendRecord {
	t.Helper()
	q.Limit = maxLimit
	recs, err := l.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// countKeys counts the keys with one prefix, straight from Pebble.
func countKeys(t testing.TB, l *Ledger, prefix byte) int {
	t.Helper()
	if err := l.ap.waitApplied(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := scan(context.Background(), l.db, []byte{prefix}, prefixEnd(prefix), func(k, v []byte) error {
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
