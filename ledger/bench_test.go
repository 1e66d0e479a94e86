package ledger

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// benchRecord is a typical record; the caller varies time and request id.
func benchRecord(i int) (*pb.SpendRecord, []*pb.BudgetUse) {
	key := fmt.Sprintf("key-%d", i%200)
	team := fmt.Sprintf("team-%d", i%20)
	return &pb.SpendRecord{
			UnixNanos:        time.Now().UnixNano(),
			RequestId:        fmt.Sprintf("chatcmpl-%016x", i),
			Node:             "node-1",
			KeyId:            key,
			TeamId:           team,
			Model:            models[i%len(models)],
			Deployment:       "azure-eastus-" + models[i%len(models)],
			Provider:         "azure",
			Endpoint:         "/v1/chat/completions",
			Stream:           true,
			PromptTokens:     1200,
			CompletionTokens: 350,
			CachedTokens:     512,
			CostNanos:        4_250_000,
			Status:           200,
			LatencyMicros:    2_300_000,
			TtftMicros:       410_000,
			Attempts:         1,
		}, []*pb.BudgetUse{
			{Budget: "key:" + key, PeriodStart: 1767225600, SpentNanos: 4_250_000},
			{Budget: "team:" + team, PeriodStart: 1767225600, SpentNanos: 4_250_000},
		}
}

// BenchmarkAppend: one caller at a time, so every Append is its own batch.
func BenchmarkAppend(b *testing.B) {
	l := openTest(b, b.TempDir(), 0)
	rec, uses := benchRecord(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		rec.UnixNanos++
		if err := l.Append(rec, uses); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendParallel: many concurrent callers (as many requests
// finishing at once), whose appends are group-committed.
func BenchmarkAppendParallel(b *testing.B) {
	l := openTest(b, b.TempDir(), 0)
	b.ReportAllocs()
	b.SetParallelism(32)
	appendParallel(b, l)
}

// appendParallel appends b.N records from the benchmark's parallel
// goroutines, each with its own record.
func appendParallel(b *testing.B, l *Ledger) {
	var n atomic.Int64
	b.RunParallel(func(p *testing.PB) {
		rec, uses := benchRecord(int(n.Add(1)))
		for p.Next() {
			rec.UnixNanos = time.Now().UnixNano()
			if err := l.Append(rec, uses); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkQueryNewest reads the newest 100 records of a 100k-record ledger
// (compacted first, so that background compactions do not skew it).
func BenchmarkQueryNewest(b *testing.B) {
	l := openTest(b, b.TempDir(), 0)
	fill(b, l, 0, 100_000)
	if err := l.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		b.Fatal(err)
	}
	for _, q := range []Query{{Limit: 100}, {KeyID: "key-7", Limit: 100}, {TeamID: "team-3", Limit: 100}} {
		name := "all"
		if q.KeyID != "" {
			name = "key"
		} else if q.TeamID != "" {
			name = "team"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				recs, err := l.Query(context.Background(), q)
				if err != nil || len(recs) != 100 {
					b.Fatal(len(recs), err)
				}
			}
		})
	}
}

// fill appends records [from, to) from 64 goroutines.
func fill(t testing.TB, l *Ledger, from, to int) {
	t.Helper()
	const workers = 64
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			var err error
			for i := from + w; i < to && err == nil; i += workers {
				rec, uses := benchRecord(i)
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

// TestLargeLedger shows that neither Append nor Query slows down as the
// ledger grows: it measures both on an empty ledger and after 10 million
// records. Set TOLLGATE_LONG=1 to run it (minutes, several GB of disk).
func TestLargeLedger(t *testing.T) {
	if os.Getenv("TOLLGATE_LONG") != "1" {
		t.Skip("set TOLLGATE_LONG=1 to append 10 million records")
	}
	const total, sample = 10_000_000, 200_000
	l := openTest(t, t.TempDir(), 0)

	measure := func(label string, from int) {
		start := time.Now()
		fill(t, l, from, from+sample)
		appendNs := time.Since(start).Nanoseconds() / sample
		for _, q := range []Query{{Limit: 100}, {KeyID: "key-7", Limit: 100}, {TeamID: "team-3", Limit: 100}} {
			const rounds = 200
			start := time.Now()
			for range rounds {
				recs, err := l.Query(context.Background(), q)
				if err != nil || len(recs) != 100 {
					t.Fatal(len(recs), err)
				}
			}
			t.Logf("%s: query %+v: %v per query", label, q, time.Since(start)/rounds)
		}
		t.Logf("%s: append (64 goroutines): %d ns/op", label, appendNs)
	}

	measure("empty ledger (appends 0-200k, queries at 200k)", 0)
	start := time.Now()
	fill(t, l, sample, total-sample)
	t.Logf("filled to %d records in %v (%v/op)", total-sample, time.Since(start), time.Since(start)/(total-2*sample))
	// A fill at full speed leaves compaction debt that a gateway's real rate
	// never builds up: measure once it is paid off, as at the start.
	start = time.Now()
	for tick := time.NewTicker(100 * time.Millisecond); ; <-tick.C {
		m := l.db.Metrics()
		if m.Compact.EstimatedDebt == 0 && m.Compact.NumInProgress == 0 {
			tick.Stop()
			break
		}
	}
	t.Logf("compactions settled in %v", time.Since(start))
	measure(fmt.Sprintf("%d records (appends %d-10M, queries at 10M)", total-sample, total-sample), total-sample)
	if n := countKeys(t, l, prefixRecord); n != total {
		t.Errorf("%d records stored, want %d", n, total)
	}
}
