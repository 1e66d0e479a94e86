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
	// segment files, one fsync per append. New data dirs use it.
	LogStoreWAL = "wal"
	// LogStoreBolt is raft-boltdb's raft.db, which releases before the
	// WAL wrote: a data dir that holds one keeps using it.
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

// openLogStore opens dir's Raft log: raft.db when the data dir has one
// (written by an earlier release; its log and term stay where they are),
// else the write-ahead log in dir/wal, in segments of segmentBytes (0:
// raft-wal's default). It returns the kind it opened.
func openLogStore(dir string, logger hclog.Logger, segmentBytes int) (logStore, string, error) {
	boltPath := filepath.Join(dir, boltFileName)
	_, err := os.Stat(boltPath)
	switch {
	case err == nil:
		// (NoFreelistSync saved nothing measurable: BENCH.md, 2026-12-02.)
		db, err := raftboltdb.New(raftboltdb.Options{Path: boltPath})
		if err != nil {
			return nil, "", fmt.Errorf("raftstore: open %s: %w", boltFileName, err)
		}
		return db, LogStoreBolt, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, "", fmt.Errorf("raftstore: open %s: %w", boltFileName, err)
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
