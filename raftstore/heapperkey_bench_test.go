package raftstore

import (
	"bytes"
	"io"
	"runtime"
	"testing"
)

// BenchmarkHeapPerKey restores a snapshot of 200,000 keys (as a restart
// does) and reports the live heap per key it holds.
func BenchmarkHeapPerKey(b *testing.B) {
	const n = 200_000
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, bigState(n)); err != nil {
		b.Fatal(err)
	}
	var perKey float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f := newFSM()
		if err := f.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perKey = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(f)
	}
	b.ReportMetric(perKey, "B/key")
}
