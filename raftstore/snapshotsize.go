package raftstore

import (
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Raft counts log entries, but ours range from a hundred bytes (a key
// create) to about a megabyte (an import of 5,000 keys, a spend report):
// 8,192 entries can be 1 MB or 8 GB of log, which a restart and a joiner
// replay and raft.db keeps. So besides Raft's count threshold, every node
// snapshots once the entries applied since its last snapshot hold
// DefaultSnapshotBytes, or half the last snapshot's size if that is more
// (so the cost of snapshotting stays a fixed share of the log written as
// the state grows), and a snapshot leaves at most DefaultTrailingBytes of
// the newest entries in the log (and at most TrailingLogs entries).
const (
	DefaultSnapshotBytes = 16 << 20
	DefaultTrailingBytes = 8 << 20
	// minTrailingLogs is the fewest entries a snapshot leaves, however
	// large: a follower a few entries behind still catches up from the log.
	minTrailingLogs = 16
)

// logMeter counts the bytes of the entries the FSM applies: since the last
// snapshot, and the sizes of the newest ones.
type logMeter struct {
	mu        sync.Mutex
	sizes     []uint32 // ring of the newest entries' sizes
	n         uint64   // entries recorded
	since     int64    // bytes since the last snapshot
	lastSnap  int64    // size of the last snapshot persisted
	threshold int64
	full      chan struct{} // signalled when since passes the threshold
}

func newLogMeter(threshold int64, ring int) *logMeter {
	return &logMeter{sizes: make([]uint32, max(ring, minTrailingLogs)), threshold: threshold, full: make(chan struct{}, 1)}
}

// add records applied entries (the FSM's apply goroutine).
func (m *logMeter) add(logs []*raft.Log) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range logs {
		m.sizes[m.n%uint64(len(m.sizes))] = uint32(min(len(l.Data), 1<<31))
		m.n++
		m.since += int64(len(l.Data))
	}
	if m.since >= max(m.threshold, m.lastSnap/2) {
		select {
		case m.full <- struct{}{}:
		default:
		}
	}
}

// snapshotTaken starts counting again: the FSM's state was just captured.
func (m *logMeter) snapshotTaken() {
	m.mu.Lock()
	m.since = 0
	m.mu.Unlock()
}

// persisted records the size of a snapshot written.
func (m *logMeter) persisted(size int64) {
	m.mu.Lock()
	m.lastSnap = size
	m.mu.Unlock()
}

// trailing returns how many of the newest entries fit in maxBytes: at
// least minTrailingLogs, at most maxEntries.
func (m *logMeter) trailing(maxBytes int64, maxEntries uint64) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var total int64
	known := min(m.n, uint64(len(m.sizes)), maxEntries)
	for k := range known {
		total += int64(m.sizes[(m.n-1-k)%uint64(len(m.sizes))])
		if total > maxBytes {
			return min(max(k, minTrailingLogs), maxEntries)
		}
	}
	return maxEntries // every entry it knows of fits
}

// countingSink counts what Persist writes.
type countingSink struct {
	raft.SnapshotSink
	n int64
}

func (c *countingSink) Write(p []byte) (int, error) {
	n, err := c.SnapshotSink.Write(p)
	c.n += int64(n)
	return n, err
}

// startSizer starts runSizeSnapshots, which Close stops.
func (s *Store) startSizer(snaps raft.SnapshotStore, rc *raft.Config) {
	if metas, err := snaps.List(); err == nil && len(metas) > 0 {
		s.fsm.meter.persisted(metas[0].Size)
	}
	s.stopSizer, s.sizerDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.sizerDone)
		s.runSizeSnapshots(s.stopSizer, rc.TrailingLogs, rc.SnapshotInterval)
	}()
}

// runSizeSnapshots takes a snapshot whenever the meter says the log has
// grown past its threshold, after sizing TrailingLogs to the newest
// entries; every SnapshotInterval it sizes TrailingLogs again for Raft's
// own snapshots. It returns when done is closed.
func (s *Store) runSizeSnapshots(done <-chan struct{}, maxTrailing uint64, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			s.sizeTrailingLogs(maxTrailing)
		case <-s.fsm.meter.full:
			s.sizeTrailingLogs(maxTrailing)
			if err := s.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) &&
				!errors.Is(err, raft.ErrRaftShutdown) && s.cfg.Logger != nil {
				s.cfg.Logger.Warn("snapshot by log size", "err", err)
			}
		}
	}
}

// sizeTrailingLogs sets Raft's TrailingLogs to the newest entries that
// fit in the trailing bytes.
func (s *Store) sizeTrailingLogs(maxTrailing uint64) {
	rc := s.raft.ReloadableConfig()
	n := s.fsm.meter.trailing(s.trailingBytes, maxTrailing)
	if rc.TrailingLogs == n {
		return
	}
	rc.TrailingLogs = n
	if err := s.raft.ReloadConfig(rc); err != nil && s.cfg.Logger != nil {
		s.cfg.Logger.Warn("size trailing logs", "err", err)
	}
}
