package raftstore

import (
	"os"
	"path/filepath"

	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// walFileMode is the mode of every file in the WAL: private to its owner,
// like the rest of the data dir (raft-wal v0.4.0 creates them 0644).
const walFileMode os.FileMode = 0o600

// walFiler is raft-wal's segment filer with two repairs for v0.4.0:
//
//   - a segment sealed by a tail truncation (Raft dropping a conflicting
//     suffix on a follower) is recorded sealed without an index block, and
//     raft-wal's reader then fails every read of it after a restart
//     ("sealed segment has no index block"; Raft panics applying such an
//     entry). Such a segment is opened the way the tail is recovered, by
//     scanning its committed frames; the WAL reads only indexes up to the
//     segment's MaxIndex from it.
//   - new segment files are made private (privateFS).
type walFiler struct {
	*segment.Filer
}

func newWALFiler(dir string) *walFiler {
	return &walFiler{Filer: segment.NewFiler(dir, privateFS{FS: walfs.New()})}
}

func (f *walFiler) Open(info types.SegmentInfo) (types.SegmentReader, error) {
	if info.IndexStart == 0 {
		// recoverTail only reads the file; the WAL never appends to it.
		return f.Filer.RecoverTail(info)
	}
	return f.Filer.Open(info)
}

// privateFS creates segment files with walFileMode.
type privateFS struct {
	*walfs.FS
}

func (p privateFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := p.FS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(filepath.Join(dir, name), walFileMode); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}
