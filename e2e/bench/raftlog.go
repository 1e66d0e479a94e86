package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// Raft log measures, as raftLogMB reports them.
const (
	// raftLogBolt: the size of the data dir's raft.db (a data dir of an
	// earlier release).
	raftLogBolt = "bolt raft.db size"
	// raftLogWAL: the encoded bytes of the entries appended after an
	// index, read from the WAL's segment files. The files themselves are
	// preallocated (64 MB each), so their size says nothing.
	raftLogWAL = "WAL entry bytes appended"
)

// raftLogMB measures a node's Raft log in raftDir: raft.db's size when
// the dir keeps a bolt log, else the MB of WAL entries above index after.
// raft-wal's DumpLogs reads the segments while the node writes them; it
// stops at the last committed append.
func raftLogMB(raftDir string, after uint64) (float64, string, error) {
	fi, err := os.Stat(filepath.Join(raftDir, "raft.db"))
	if err == nil {
		return float64(fi.Size()) / (1 << 20), raftLogBolt, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return 0, "", err
	}
	var n int
	filer := segment.NewFiler(filepath.Join(raftDir, "wal"), walfs.New())
	err = filer.DumpLogs(after, 0, func(_ types.SegmentInfo, e types.LogEntry) (bool, error) {
		n += len(e.Data)
		return true, nil
	})
	return float64(n) / (1 << 20), raftLogWAL, err
}
