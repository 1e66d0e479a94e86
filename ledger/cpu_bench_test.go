package ledger

import (
	"syscall"
	"testing"
	"time"
)

// processCPU returns the user plus system CPU time of the whole process.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// settleBackground flushes the memtables and waits (bounded) until Pebble has
// run no compaction for 200 ms, so that a benchmark pays for the background
// work its appends caused.
func settleBackground(tb testing.TB, l *Ledger) {
	tb.Helper()
	if err := l.ap.waitApplied(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	if err := l.db.Flush(); err != nil {
		tb.Fatal(err)
	}
	idle := 0
	for range 3000 { // at most 30 s
		if l.db.Metrics().Compact.NumInProgress == 0 {
			idle++
		} else {
			idle = 0
		}
		if idle == 20 { // none running for 200 ms: Pebble picked nothing more
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Log("compactions did not settle within 30 s")
}

// BenchmarkAppendCPU is the ledger's whole CPU cost per record, as a gateway
// node pays it: 32 concurrent appenders (group commit), and then the
// applier's memtable inserts, the flushes and the compactions those records
// cause (waited for before the clock stops). cpu-ns/op is the process's CPU
// time (user + system, every goroutine) per Append; flushed-B/op and
// compacted-B/op are the bytes Pebble wrote in flushes and in compactions
// per Append. Run it with -benchtime 300000x: compaction's share grows with
// the ledger's size.
func BenchmarkAppendCPU(b *testing.B) {
	l := openTest(b, b.TempDir(), 0)
	b.ReportAllocs()
	b.SetParallelism(16) // 32 appenders on 2 cores
	cpu0 := processCPU(b)
	appendParallel(b, l)
	settleBackground(b, l)
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	t := l.db.Metrics().Total()
	b.ReportMetric(float64(t.TableBytesFlushed)/float64(b.N), "flushed-B/op")
	b.ReportMetric(float64(t.TableBytesCompacted)/float64(b.N), "compacted-B/op")
}
