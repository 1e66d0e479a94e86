package raftstore

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// Log store kinds, as LogStoreKind reports them.
const (
	// LogStoreWAL is hashicorp/raft-wal in the data dir's wal/: append-only
	// segment files, one fsync per append. Opt-in for new data dirs
	// (Config.LogStore): v0.4.0, the release the module proxy serves, needs
	// the repairs below, and releases before it do not read wal/.
	LogStoreWAL = "wal"
	// LogStoreBolt is raft-boltdb's raft.db: the default for a new data
	// dir, and what every earlier release wrote.
	LogStoreBolt = "bolt"
)

const (
	boltFileName = "raft.db"
	walDirName   = "wal"
)

// logStore is Raft's log and stable store together, as both raft-boltdb
// and raft-wal implement them.
type logStore interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

// openLogStore opens dir's Raft log in the store the data dir already
// has: raft.db, or the write-ahead log in dir/wal (in segments of
// segmentBytes; 0: raft-wal's default). A new data dir gets the store
// named by want (LogStoreBolt when empty). A data dir with both refuses to
// open: one of them is stale (a release before the WAL, started on a WAL
// data dir, begins an empty raft.db beside it), and picking either could
// lose entries. It returns the kind it opened.
func openLogStore(dir string, logger hclog.Logger, segmentBytes int, want string) (logStore, string, error) {
	boltPath := filepath.Join(dir, boltFileName)
	hasBolt, err := exists(boltPath)
	if err != nil {
		return nil, "", fmt.Errorf("raftstore: open %s: %w", boltFileName, err)
	}
	hasWAL, err := exists(filepath.Join(dir, walDirName))
	if err != nil {
		return nil, "", fmt.Errorf("raftstore: open %s: %w", walDirName, err)
	}
	switch {
	case hasBolt && hasWAL:
		return nil, "", fmt.Errorf("raftstore: %s holds both %s and %s/; one of them is stale (was this data dir opened by an older release?): keep the one this node last ran with, move the other away, and start again", dir, boltFileName, walDirName)
	case want != "" && want != LogStoreBolt && want != LogStoreWAL:
		return nil, "", fmt.Errorf("raftstore: unknown Raft log store %q (want %s or %s)", want, LogStoreBolt, LogStoreWAL)
	case hasBolt || !hasWAL && want != LogStoreWAL:
		// (NoFreelistSync saved nothing measurable: BENCH.md, 2026-12-02.)
		db, err := raftboltdb.New(raftboltdb.Options{Path: boltPath})
		if err != nil {
			return nil, "", fmt.Errorf("raftstore: open %s: %w", boltFileName, err)
		}
		return db, LogStoreBolt, nil
	}
	walDir := filepath.Join(dir, walDirName)
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		return nil, "", fmt.Errorf("raftstore: create %s: %w", walDirName, err)
	}
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(walDir, wal.WithLogger(logger.Named("wal")), wal.WithMetaStore(meta),
		wal.WithSegmentFiler(newWALFiler(walDir)),
		wal.WithSegmentSize(cmp.Or(segmentBytes, wal.DefaultSegmentSize)))
	if err == nil {
		// raft-wal v0.4.0 creates its metadata file 0644.
		err = os.Chmod(filepath.Join(walDir, metadb.FileName), walFileMode)
		if err != nil {
			_ = w.Close()
		}
	}
	if err != nil {
		_ = meta.Close()
		return nil, "", fmt.Errorf("raftstore: open %s: %w", walDirName, err)
	}
	return &walStore{WAL: w, meta: meta}, LogStoreWAL, nil
}

// walStore closes the WAL's metadata file with it: raft-wal v0.4.0's Close
// leaves it open, and its lock would keep the data dir from opening again
// in this process.
type walStore struct {
	*wal.WAL
	meta *metadb.BoltMetaDB
}

// GetLog refuses an index below FirstIndex: raft-wal v0.4.0 still reads
// compacted entries from a segment it has not deleted yet, and a leader
// would then send a lagging follower those instead of its snapshot.
func (w *walStore) GetLog(index uint64, l *raft.Log) error {
	first, err := w.WAL.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	return w.WAL.GetLog(index, l)
}

func (w *walStore) Close() error {
	return errors.Join(w.WAL.Close(), w.meta.Close())
}

// exists reports whether path exists.
func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}
