package raftstore

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// BenchmarkLogStoreAppend appends one ~200-byte entry per op (a key
// create's size) to each log store, as Raft does for a lone write, and
// reports the process CPU (user+system) per append besides the wall time.
func BenchmarkLogStoreAppend(b *testing.B) {
	for _, kind := range []string{LogStoreBolt, LogStoreWAL} {
		b.Run(kind, func(b *testing.B) {
			ls := openBenchLogStore(b, kind)
			defer ls.Close()
			data := make([]byte, 200)
			cpu0 := processCPU(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l := &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
				if err := ls.StoreLogs([]*raft.Log{l}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu0)/1e3/float64(b.N), "cpu-us/op")
		})
	}
}

func openBenchLogStore(b *testing.B, kind string) logStore {
	ls, got, err := openLogStore(b.TempDir(), hclog.NewNullLogger(), 0, kind)
	if err != nil || got != kind {
		b.Fatalf("openLogStore: %q, %v", got, err)
	}
	return ls
}
