package raftstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// restartDir builds a data directory holding n keys, imported through a
// real Store in ImportKeys entries, and closes it; with snapshot, it takes
// a snapshot first (what a single node does at SIGTERM), else a restart
// replays the import entries (a node killed before any snapshot).
func restartDir(b *testing.B, n int, snapshot bool) string {
	b.Helper()
	cfg := testConfig(b.TempDir())
	cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.SnapshotBytes = 1<<40, time.Hour, 1<<40
	s, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i += MaxImportBatch {
		keys := make([]*pb.StoredKey, 0, MaxImportBatch)
		for j := i; j < min(n, i+MaxImportBatch); j++ {
			id := fmt.Sprintf("key_%08d", j)
			keys = append(keys, newStoredKey(id, "secret-"+id))
		}
		if _, err := s.Apply(ctx, importCmd(keys...)); err != nil {
			b.Fatal(err)
		}
	}
	if snapshot {
		s.SnapshotForRestart()
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return cfg.Dir
}

// BenchmarkStoreRestart opens a data directory of n keys and waits until
// the store is ready and has applied its whole log: a node's restart, as
// far as the control state goes.
func BenchmarkStoreRestart(b *testing.B) {
	for _, snapshot := range []bool{true, false} {
		b.Run(fmt.Sprintf("keys=250000/snapshot=%v", snapshot), func(b *testing.B) {
			dir := restartDir(b, 250_000, snapshot)
			cfg := testConfig(dir)
			cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.SnapshotBytes = 1<<40, time.Hour, 1<<40
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU(b)
			for b.Loop() {
				s, err := Open(cfg)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				err = s.WaitReady(ctx)
				if err == nil {
					err = s.WaitCaughtUp(ctx, s.lastIndexAtOpen)
				}
				cancel()
				if err == nil && s.State().KeyCount() != 250_000 {
					err = fmt.Errorf("%d keys after the restart", s.State().KeyCount())
				}
				if cerr := s.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
