package raftstore

import (
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// walFiler is raft-wal's segment filer with a repair for v0.4.0: a
// segment sealed by a tail truncation (Raft dropping a conflicting suffix
// on a follower) is recorded sealed without an index block, and raft-wal's
// reader then fails every read of it after a restart ("sealed segment has
// no index block"; Raft panics applying such an entry). Such a segment is
// opened the way the tail is recovered, by scanning its committed frames;
// the WAL reads only indexes up to the segment's MaxIndex from it.
type walFiler struct {
	*segment.Filer
}

func newWALFiler(dir string) *walFiler {
	return &walFiler{Filer: segment.NewFiler(dir, walfs.New())}
}

func (f *walFiler) Open(info types.SegmentInfo) (types.SegmentReader, error) {
	if info.IndexStart == 0 {
		// recoverTail only reads the file; the WAL never appends to it.
		return f.Filer.RecoverTail(info)
	}
	return f.Filer.Open(info)
}
