package ledger

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// stuckSyncFS counts the fsyncs that reach WAL files, and holds each one
// until release is closed.
type stuckSyncFS struct {
	vfs.FS
	syncs   *atomic.Int64
	release chan struct{}
}

func (fs stuckSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(f, err, name)
}

func (fs stuckSyncFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(old, name, c)
	return fs.wrap(f, err, name)
}

func (fs stuckSyncFS) wrap(f vfs.File, err error, name string) (vfs.File, error) {
	if err != nil || !isWAL(name) {
		return f, err
	}
	return stuckSyncFile{f, fs}, nil
}

type stuckSyncFile struct {
	vfs.File
	fs stuckSyncFS
}

func (f stuckSyncFile) Sync() error { return f.SyncData() }

func (f stuckSyncFile) SyncData() error {
	f.fs.syncs.Add(1)
	<-f.fs.release
	return f.File.SyncData()
}

// TestAppendNeverWaitsOnFsync holds every WAL fsync while 20000 records are
// appended (enough for several WAL rotations): the appends must complete all
// the same. A newly cut report is fsynced before NextReport returns it, once;
// Close fsyncs.
func TestAppendNeverWaitsOnFsync(t *testing.T) {
	var syncs atomic.Int64
	release := make(chan struct{})
	baseFS = stuckSyncFS{vfs.Default, &syncs, release}
	t.Cleanup(func() { baseFS = vfs.Default })
	l := openTest(t, t.TempDir(), 0)
	base := testBase()

	appended := make(chan struct{})
	go func() {
		defer close(appended)
		appendRange(t, l, base, 0, 200, 1) // 200 serial commits
		appendRange(t, l, base, 200, 20000, 16)
	}()
	select {
	case <-appended:
	case <-time.After(time.Minute):
		t.Fatalf("appends stuck behind a held fsync (%d fsyncs waiting)", syncs.Load())
	}
	t.Logf("%d WAL fsyncs (of rotated WALs) were held while appending", syncs.Load())
	close(release)

	before := syncs.Load()
	if _, err := l.NextReport(); err != nil {
		t.Fatal(err)
	}
	afterCut := syncs.Load()
	if afterCut == before {
		t.Fatal("NextReport did not fsync the newly cut report")
	}
	if _, err := l.NextReport(); err != nil {
		t.Fatal(err)
	}
	if n := syncs.Load() - afterCut; n != 0 {
		t.Fatalf("returning the same report again fsynced %d times", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if syncs.Load() == afterCut {
		t.Error("Close did not fsync the WAL")
	}
}
