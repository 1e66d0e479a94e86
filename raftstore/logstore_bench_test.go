package raftstore

import (
	"os"
	"path/filepath"
	"syscall"
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
			cpu0 := processCPU()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l := &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
				if err := ls.StoreLogs([]*raft.Log{l}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}

func openBenchLogStore(b *testing.B, kind string) logStore {
	dir := b.TempDir()
	if kind == LogStoreBolt { // an existing raft.db selects bolt
		if err := os.WriteFile(filepath.Join(dir, boltFileName), nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	ls, got, err := openLogStore(dir, hclog.NewNullLogger(), 0)
	if err != nil || got != kind {
		b.Fatalf("openLogStore: %q, %v", got, err)
	}
	return ls
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
