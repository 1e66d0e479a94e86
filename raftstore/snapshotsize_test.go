package raftstore

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func logsOfSizes(sizes ...int) []*raft.Log {
	out := make([]*raft.Log, len(sizes))
	for i, n := range sizes {
		out[i] = &raft.Log{Data: make([]byte, n)}
	}
	return out
}

// A snapshot leaves the newest entries that fit in the trailing bytes,
// never fewer than minTrailingLogs nor more than TrailingLogs; all of them
// when every entry it knows of fits.
func TestTrailingLogsFitTheTrailingBytes(t *testing.T) {
	m := newLogMeter(1<<20, 100)
	m.add(logsOfSizes(make([]int, 50)...)) // 50 empty entries
	if got := m.trailing(1000, 100); got != 100 {
		t.Errorf("all known entries fit: %d, want TrailingLogs 100", got)
	}
	for range 30 {
		m.add(logsOfSizes(100))
	}
	if got := m.trailing(1000, 100); got != 16 { // 10 fit; the floor is 16
		t.Errorf("100-byte entries in 1,000 bytes: %d, want the floor 16", got)
	}
	if got := m.trailing(2500, 100); got != 25 {
		t.Errorf("100-byte entries in 2,500 bytes: %d, want 25", got)
	}
	if got := m.trailing(1<<20, 20); got != 20 {
		t.Errorf("capped by TrailingLogs: %d, want 20", got)
	}
}

// The meter asks for a snapshot once the entries since the last one hold
// the threshold, or half the last snapshot's size when that is larger.
func TestSnapshotByLogBytesGrowsWithTheSnapshot(t *testing.T) {
	m := newLogMeter(1000, 100)
	full := func() bool {
		select {
		case <-m.full:
			return true
		default:
			return false
		}
	}
	m.add(logsOfSizes(600))
	if full() {
		t.Fatal("asked at 600 of 1,000 bytes")
	}
	m.add(logsOfSizes(400))
	if !full() {
		t.Fatal("not asked at 1,000 bytes")
	}
	m.snapshotTaken()
	m.persisted(10_000)
	m.add(logsOfSizes(4000))
	if full() {
		t.Fatal("asked at 4,000 bytes after a 10,000-byte snapshot")
	}
	m.add(logsOfSizes(1000))
	if !full() {
		t.Fatal("not asked at half the last snapshot's size")
	}
}

// Entries far larger than the count threshold expects make a snapshot by
// their bytes, and the log it leaves holds the trailing bytes' worth of
// entries (at least minTrailingLogs), not TrailingLogs of them.
func TestStoreSnapshotsByLogBytes(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.SnapshotThreshold = 1 << 30 // never by count
	cfg.SnapshotBytes, cfg.TrailingBytes = 64<<10, 8<<10
	s := openReady(t, cfg)
	waitLeader(t, s)
	pad := strings.Repeat("x", 4<<10)
	for i := range 40 {
		k := createKeyCmd("k"+strconv.Itoa(i), "s"+strconv.Itoa(i))
		k.GetCreateKey().Key.Key.Metadata = map[string]string{"pad": pad}
		mustApply(t, s, k)
	}
	ctx := ctxT(t)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	// Raft publishes a snapshot's index before it compacts the log: wait
	// for the compaction rather than judge the log in between.
	for {
		snap, _ := strconv.ParseUint(s.Stats()["last_snapshot_index"], 10, 64)
		first, err := s.logs.FirstIndex()
		if err != nil {
			t.Fatal(err)
		}
		if first > 1 && snap-first+1 <= minTrailingLogs {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no snapshot or no compaction to %d entries after 160 KB of entries (last snapshot index %d, first index %d)", minTrailingLogs, snap, first)
		case <-tick.C:
		}
	}
}
