package ledger

import (
	"errors"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walFS gives the ledger the durability it states: a committed batch has been
// written to the operating system (it survives kill -9 of the process), but
// nobody waited for an fsync.
//
// Pebble has no such setting. With pebble.NoSync a commit only copies the
// batch into the WAL writer's in-process 32 KiB block buffer, which reaches
// the file when the block fills, on a sync or on Close: a kill -9 loses the
// tail (tested: 100 of 100 small NoSync writes lost). With pebble.Sync the
// WAL writer writes the buffered data to the file and then calls Sync on it.
// So the ledger commits with pebble.Sync and wraps the WAL files (*.log) so
// that Sync and SyncData return at once: the commit returns after write(2)
// and never waits for the disk.
//
// Real fsyncs still happen, off the commit path: when Pebble closes a WAL
// (it rotates one with every memtable, inside a commit) the file is fsynced
// and closed by a goroutine of its own, and Close returns at once; syncWAL
// fsyncs the open WAL files and waits for those being closed, from the
// caller's goroutine. The ledger calls it before it hands out a newly cut
// spend report, and waitClosed after closing Pebble. Other files (sstables,
// MANIFEST, directories) are untouched.
type walFS struct {
	vfs.FS

	mu      sync.Mutex
	open    map[*walFile]struct{}
	closing map[*walFile]chan struct{} // closed when the file is fsynced and closed
	err     error                      // first error of a background close
}

func newWALFS(fs vfs.FS) *walFS {
	return &walFS{FS: fs, open: make(map[*walFile]struct{}), closing: make(map[*walFile]chan struct{})}
}

func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (fs *walFS) wrap(f vfs.File, err error, name string) (vfs.File, error) {
	if err != nil || !isWAL(name) {
		return f, err
	}
	w := &walFile{File: f, fs: fs}
	fs.mu.Lock()
	fs.open[w] = struct{}{}
	fs.mu.Unlock()
	return w, nil
}

func (fs *walFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return fs.wrap(f, err, name)
}

func (fs *walFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.wrap(f, err, newname)
}

func (fs *walFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	return fs.wrap(f, err, name)
}

// syncWAL fsyncs every WAL file: everything committed before the call is
// then on disk.
func (fs *walFS) syncWAL() error {
	fs.mu.Lock()
	files := make([]*walFile, 0, len(fs.open))
	for f := range fs.open {
		files = append(files, f)
	}
	fs.mu.Unlock()
	var errs []error
	for _, f := range files {
		errs = append(errs, f.fsync())
	}
	return errors.Join(append(errs, fs.waitClosed())...)
}

// waitClosed waits for the WAL files being closed in the background and
// returns the first error any background close had.
func (fs *walFS) waitClosed() error {
	fs.mu.Lock()
	waits := make([]chan struct{}, 0, len(fs.closing))
	for _, done := range fs.closing {
		waits = append(waits, done)
	}
	fs.mu.Unlock()
	for _, done := range waits {
		<-done
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.err
}

// walFile is a WAL file whose Sync only means "written to the OS".
type walFile struct {
	vfs.File
	fs *walFS

	mu     sync.Mutex // orders fsync against the background close
	closed bool
}

func (f *walFile) Sync() error                             { return nil }
func (f *walFile) SyncData() error                         { return nil }
func (f *walFile) SyncTo(int64) (fullSync bool, err error) { return false, nil }

func (f *walFile) fsync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil // its close fsynced it
	}
	return f.File.SyncData()
}

// Close returns at once: Pebble has written everything to the file already,
// and a goroutine fsyncs and closes it. Until it is done, syncWAL waits for it.
func (f *walFile) Close() error {
	fs := f.fs
	done := make(chan struct{})
	fs.mu.Lock()
	delete(fs.open, f)
	fs.closing[f] = done
	fs.mu.Unlock()
	go func() {
		f.mu.Lock()
		err := f.File.SyncData()
		f.closed = true
		f.mu.Unlock()
		err = errors.Join(err, f.File.Close())

		fs.mu.Lock()
		delete(fs.closing, f)
		if err != nil && fs.err == nil {
			fs.err = err
		}
		fs.mu.Unlock()
		close(done)
	}()
	return nil
}
