package ledger

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// crash leaves l on disk as a kill -9 would: the writer and retention stop,
// the journal's files are closed as they are (no fsync, nothing removed)
// and Pebble is closed without flushing its memtables, which it holds
// without a WAL: their content is lost. The test's cleanup Close is then a
// no-op.
func crash(t testing.TB, l *Ledger) {
	t.Helper()
	l.mu.Lock()
	l.closed = true
	close(l.ops)
	l.mu.Unlock()
	<-l.wDone
	<-l.ap.done
	l.bgCancel()
	<-l.bgDone
	j := l.j
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	close(j.stop)
	j.bg.Wait()
	if err := j.cur.f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(l.w.close(), l.db.Close()); err != nil {
		t.Fatal(err)
	}
}

// segments lists the journal's segment files (and, with ext, other files
// ending so).
func segments(t testing.TB, dir, ext string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, journalDirName))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ext) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

func setSegmentSize(t *testing.T, n int64, flush bool) {
	size, f := segmentSize, flushOnRotate
	segmentSize, flushOnRotate = n, flush
	t.Cleanup(func() { segmentSize, flushOnRotate = size, f })
}

// checkPrefix asserts that l holds exactly records [0, n) of base, with the
// pending sums of exactly those (nothing was cut): a consistent prefix.
func checkPrefix(t *testing.T, l *Ledger, base int64, n int) {
	t.Helper()
	recs := queryAll(t, l, Query{})
	if len(recs) != n {
		t.Fatalf("%d records, want %d", len(recs), n)
	}
	for i, r := range recs { // newest first
		if want := genID(n - 1 - i); r.RequestId != want {
			t.Fatalf("record %d is %s, want %s", i, r.RequestId, want)
		}
	}
	roll, bud := expected(base, 0, n)
	equalMsgs(t, "unreported", l.Unreported(), bud)
	rep, err := l.NextReport()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		if rep != nil {
			t.Fatalf("report %v from an empty ledger", rep)
		}
		return
	}
	equalReports(t, rep, &Report{Seq: rep.Seq, Rollups: roll, Budgets: bud})
}

func genID(i int) string {
	rec, _ := genRecord(0, i)
	return rec.RequestId
}

// TestJournalReplay: records, a cut report and its acknowledgement that
// only the journal holds (Pebble's memtables are lost in a crash) are all
// there after Open, across several segments; without the journal they
// would not be.
func TestJournalReplay(t *testing.T) {
	setSegmentSize(t, 16<<10, false) // keep every segment: nothing flushed
	dir := t.TempDir()
	base := testBase()
	l := openTest(t, dir, 0)
	appendRange(t, l, base, 0, 300, 4)
	if rep, err := l.NextReport(); err != nil || rep == nil || rep.Seq != 1 {
		t.Fatalf("cut: %v %v", rep, err)
	}
	if err := l.AckReport(1); err != nil {
		t.Fatal(err)
	}
	appendRange(t, l, base, 300, 600, 4)
	if rep, err := l.NextReport(); err != nil || rep == nil || rep.Seq != 2 {
		t.Fatalf("cut: %v %v", rep, err)
	}
	appendRange(t, l, base, 600, 700, 1)
	crash(t, l)
	if n := len(segments(t, dir, segmentExt)); n < 4 {
		t.Fatalf("%d segments; the test wants several", n)
	}

	// The same data dir without its journal: Pebble alone lost the tail.
	bare := t.TempDir()
	if err := os.CopyFS(bare, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(bare, journalDirName)); err != nil {
		t.Fatal(err)
	}
	lb := openTest(t, bare, 0)
	if n := len(queryAll(t, lb, Query{})); n >= 700 {
		t.Fatalf("without the journal %d records are there: the test does not exercise replay", n)
	}

	l = openTest(t, dir, 0)
	if n := len(queryAll(t, l, Query{})); n != 700 {
		t.Fatalf("after replay: %d records, want 700", n)
	}
	// Report 1 was acknowledged; report 2 (records 300-599) is returned
	// again, then the pending 600-699.
	roll, bud := expected(base, 300, 600)
	rep, err := l.NextReport()
	if err != nil {
		t.Fatal(err)
	}
	equalReports(t, rep, &Report{Seq: 2, Rollups: roll, Budgets: bud})
	if err := l.AckReport(2); err != nil {
		t.Fatal(err)
	}
	roll, bud = expected(base, 600, 700)
	if rep, err = l.NextReport(); err != nil {
		t.Fatal(err)
	}
	equalReports(t, rep, &Report{Seq: 3, Rollups: roll, Budgets: bud})
}

// TestJournalTornTail: a frame cut short at the end of the journal (a
// crash mid-write) is dropped as a whole, record and sums together; the
// frames written after the restart follow on and survive the next crash.
func TestJournalTornTail(t *testing.T) {
	dir := t.TempDir()
	base := testBase()
	l := openTest(t, dir, 0)
	appendRange(t, l, base, 0, 50, 1) // one frame per record
	crash(t, l)
	segs := segments(t, dir, segmentExt)
	last := filepath.Join(dir, journalDirName, segs[len(segs)-1])
	fi, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(last, fi.Size()-5); err != nil {
		t.Fatal(err)
	}

	l = openTest(t, dir, 0)
	if n := len(queryAll(t, l, Query{})); n != 49 {
		t.Fatalf("%d records after a torn last frame, want 49", n)
	}
	appendRange(t, l, base, 49, 60, 1)
	crash(t, l)
	l = openTest(t, dir, 0)
	checkPrefix(t, l, base, 60)
}

// TestJournalCorruptMiddle: a bad frame in the middle of the journal ends
// the replay there. The segments after it cannot follow on: they are set
// aside (*.discarded), not applied out of order, and what is left is a
// consistent prefix that new appends continue.
func TestJournalCorruptMiddle(t *testing.T) {
	setSegmentSize(t, 8<<10, false)
	dir := t.TempDir()
	base := testBase()
	l := openTest(t, dir, 0)
	appendRange(t, l, base, 0, 200, 1)
	crash(t, l)
	segs := segments(t, dir, segmentExt)
	if len(segs) < 4 {
		t.Fatalf("%d segments; the test wants at least 4", len(segs))
	}
	// Flip a byte in the middle of the second segment.
	p := filepath.Join(dir, journalDirName, segs[1])
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}

	l = openTest(t, dir, 0)
	n := len(queryAll(t, l, Query{}))
	if n == 0 || n >= 200 {
		t.Fatalf("%d records after a bad frame in segment 2 of %d", n, len(segs))
	}
	if got := segments(t, dir, discardedExt); len(got) != len(segs)-2 {
		t.Fatalf("discarded %v, want the %d segments after the bad one", got, len(segs)-2)
	}
	appendRange(t, l, base, n, n+20, 1)
	crash(t, l)
	l = openTest(t, dir, 0)
	checkPrefix(t, l, base, n+20)
}

// segmentFS hands every journal segment it creates to wrap.
type segmentFS struct {
	vfs.FS
	wrap func(vfs.File) vfs.File
}

func (fs segmentFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err != nil || !strings.HasSuffix(name, segmentExt) {
		return f, err
	}
	return fs.wrap(f), nil
}

// failFile makes the next write fail once armed: after writing half of it,
// or (whole) all of it.
type failFile struct {
	vfs.File
	arm   *atomic.Bool
	whole bool
}

func (f failFile) Write(p []byte) (int, error) {
	if f.arm.CompareAndSwap(true, false) {
		if !f.whole {
			p = p[:len(p)/2]
		}
		n, _ := f.File.Write(p)
		return n, errors.New("injected: input/output error")
	}
	return f.File.Write(p)
}

// TestJournalWriteFailure: an append whose journal write fails gets the
// error and is not stored; the appends after it are, and survive a crash:
// the failed frame's seq goes to the next frame, in a new segment. Also
// when the failed write did reach the file whole: the new segment
// supersedes it.
func TestJournalWriteFailure(t *testing.T) {
	t.Run("half", func(t *testing.T) { testJournalWriteFailure(t, false) })
	t.Run("whole", func(t *testing.T) { testJournalWriteFailure(t, true) })
}

func testJournalWriteFailure(t *testing.T, whole bool) {
	var arm atomic.Bool
	baseFS = segmentFS{vfs.Default, func(f vfs.File) vfs.File { return failFile{f, &arm, whole} }}
	t.Cleanup(func() { baseFS = vfs.Default })
	dir := t.TempDir()
	base := testBase()
	l := openTest(t, dir, 0)
	appendRange(t, l, base, 0, 10, 1)
	arm.Store(true)
	rec, uses := genRecord(base, 1000)
	if err := l.Append(rec, uses); err == nil {
		t.Fatal("append with a failing journal write returned nil")
	}
	// Record 1000 is not stored, now nor after the crash.
	if whole {
		// Killed right after the failed write, before any other frame:
		// the new segment made at the failure supersedes it all the same.
		crash(t, l)
		l = openTest(t, dir, 0)
		if n := len(queryAll(t, l, Query{})); n != 10 {
			t.Fatalf("after a crash right after the failed write: %d records, want 10", n)
		}
	}
	appendRange(t, l, base, 10, 30, 1)
	checkPrefix(t, l, base, 30)
	crash(t, l)
	if n := len(segments(t, dir, segmentExt)); n != 2 {
		t.Fatalf("%d segments, want 2 (a new one after the failed write)", n)
	}
	l = openTest(t, dir, 0)
	checkPrefix(t, l, base, 30)
}

// TestJournalSegmentsRemoved: once Pebble has flushed what a rotated
// segment holds, the segment is removed; Close flushes and removes the
// rest, so a clean restart replays nothing.
func TestJournalSegmentsRemoved(t *testing.T) {
	setSegmentSize(t, 32<<10, true)
	dir := t.TempDir()
	base := testBase()
	l, err := Open(Config{Dir: dir, NodeID: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, l, base, 0, 2000, 8)
	deadline := time.Now().Add(10 * time.Second)
	for len(segments(t, dir, segmentExt)) > 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if segs := segments(t, dir, segmentExt); len(segs) > 2 {
		t.Fatalf("%d segments left after flushes: %v", len(segs), segs)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if segs := segments(t, dir, segmentExt); len(segs) != 0 {
		t.Fatalf("segments left after Close: %v", segs)
	}
	l = openTest(t, dir, 0)
	checkPrefix(t, l, base, 2000)
}

// stuckSyncFile counts its fsyncs, and holds each one until release is
// closed.
type stuckSyncFile struct {
	vfs.File
	syncs   *atomic.Int64
	release chan struct{}
}

func (f stuckSyncFile) Sync() error { return f.SyncData() }

func (f stuckSyncFile) SyncData() error {
	f.syncs.Add(1)
	<-f.release
	return f.File.SyncData()
}

// TestAppendNeverWaitsOnFsync holds every journal fsync while 20000 records
// are appended (many segment rotations): the appends must complete all the
// same. A newly cut report is fsynced before NextReport returns it, once;
// Close fsyncs.
func TestAppendNeverWaitsOnFsync(t *testing.T) {
	setSegmentSize(t, 64<<10, true)
	var syncs atomic.Int64
	release := make(chan struct{})
	baseFS = segmentFS{vfs.Default, func(f vfs.File) vfs.File { return stuckSyncFile{f, &syncs, release} }}
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
	if syncs.Load() == 0 {
		t.Fatal("no segment was rotated (and fsynced): the test proves nothing")
	}
	t.Logf("%d journal fsyncs (of rotated segments) were held while appending", syncs.Load())
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
		t.Error("Close did not fsync the journal")
	}
}

// powerLoss returns what survives a machine crash of fs now: only what was
// fsynced (files and directory entries).
func powerLoss(fs *vfs.MemFS) *vfs.MemFS {
	return fs.CrashClone(vfs.CrashCloneCfg{})
}

// TestJournalReportSurvivesPowerLoss: a report NextReport returned is on
// disk: on a fresh data dir (the journal directory's own entry included),
// and after a kill -9 and a restart that replayed frames only the killed
// process's page cache held: those are fsynced before frames that follow
// them, so a power loss cannot keep the later ones and lose them.
func TestJournalReportSurvivesPowerLoss(t *testing.T) {
	for _, killFirst := range []bool{false, true} {
		name := map[bool]string{false: "fresh", true: "after kill -9 and replay"}[killFirst]
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			baseFS = fs
			t.Cleanup(func() { baseFS = vfs.Default })
			base := testBase()
			l := openTest(t, "/d", 0)
			appendRange(t, l, base, 0, 50, 1)
			if killFirst {
				crash(t, l)              // the page cache (the MemFS) keeps it all
				l = openTest(t, "/d", 0) // replays 50 frames
			}
			appendRange(t, l, base, 50, 60, 1)
			rep, err := l.NextReport()
			if err != nil || rep == nil || rep.Seq != 1 {
				t.Fatalf("cut: %v %v", rep, err)
			}
			roll, bud := expected(base, 0, 60)
			equalReports(t, rep, &Report{Seq: 1, Rollups: roll, Budgets: bud})

			after := powerLoss(fs)
			crash(t, l)
			baseFS = after
			l = openTest(t, "/d", 0)
			got, err := l.NextReport()
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Fatalf("report 1, returned after an fsync, is gone after a power loss (%d records left)",
					len(queryAll(t, l, Query{})))
			}
			equalReports(t, got, &Report{Seq: 1, Rollups: roll, Budgets: bud})
		})
	}
}

// sstFailFS fails the creation of sstables while armed: a full disk, on
// which Pebble retries a flush without end.
type sstFailFS struct {
	vfs.FS
	arm *atomic.Bool
}

func (fs sstFailFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.arm.Load() && strings.HasSuffix(name, ".sst") {
		time.Sleep(time.Millisecond) // keep Pebble's retries from spinning a core
		return nil, errors.New("injected: no space left on device")
	}
	return fs.FS.Create(name, c)
}

// TestCloseWhenFlushCannotFinish: Close does not hang on a flush that
// cannot finish; it keeps the journal, and once the disk is back nothing
// is lost.
func TestCloseWhenFlushCannotFinish(t *testing.T) {
	timeout := closeFlushTimeout
	closeFlushTimeout = 300 * time.Millisecond
	t.Cleanup(func() { closeFlushTimeout = timeout })
	var arm atomic.Bool
	mem := vfs.NewMem()
	baseFS = sstFailFS{mem, &arm}
	t.Cleanup(func() { baseFS = vfs.Default })
	base := testBase()
	l, err := Open(Config{Dir: "/d", NodeID: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, l, base, 0, 20, 1)
	arm.Store(true)
	done := make(chan error, 1)
	go func() { done <- l.Close() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Close returned nil, though its flush could not finish")
		}
		t.Logf("Close: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung on a flush that cannot finish")
	}
	segs, err := mem.List("/d/journal")
	if err != nil || !slices.ContainsFunc(segs, func(n string) bool { return strings.HasSuffix(n, segmentExt) }) {
		t.Fatalf("journal after a failed Close: %v %v", segs, err)
	}
	arm.Store(false) // the disk is back; Pebble's own Close can finish
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err = Open(Config{Dir: "/d", NodeID: "node-1"})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	checkPrefix(t, l, base, 20)
}

// holdFile holds the first fsync after arm until release.
type holdFile struct {
	vfs.File
	arm           *atomic.Bool
	held, release chan struct{}
}

func (f holdFile) SyncData() error {
	if f.arm.CompareAndSwap(true, false) {
		close(f.held)
		<-f.release
	}
	return f.File.SyncData()
}

// TestNextReportSyncDuringClose: Close waits for a NextReport whose fsync
// of the journal is in progress, rather than close the file under it.
func TestNextReportSyncDuringClose(t *testing.T) {
	var arm atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	baseFS = segmentFS{vfs.Default, func(f vfs.File) vfs.File { return holdFile{f, &arm, held, release} }}
	t.Cleanup(func() { baseFS = vfs.Default })
	l, err := Open(Config{Dir: t.TempDir(), NodeID: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, l, testBase(), 0, 5, 1)
	arm.Store(true)
	errc := make(chan error, 1)
	go func() { _, err := l.NextReport(); errc <- err }()
	<-held // NextReport is inside the segment's fsync
	cerr := make(chan error, 1)
	go func() { cerr <- l.Close() }()
	select {
	case err := <-cerr:
		t.Fatalf("Close returned (%v) while NextReport's fsync of the same file was in progress", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-errc; err != nil {
		t.Errorf("NextReport: %v", err)
	}
	if err := <-cerr; err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestJournalIdleKill: a node killed before its first append leaves an
// empty segment; the restart removes it rather than keep a *.discarded
// file per restart.
func TestJournalIdleKill(t *testing.T) {
	dir := t.TempDir()
	for range 3 {
		crash(t, openTest(t, dir, 0))
	}
	l := openTest(t, dir, 0)
	if d := segments(t, dir, discardedExt); len(d) != 0 {
		t.Fatalf("discarded after idle restarts: %v", d)
	}
	checkPrefix(t, l, testBase(), 0)
}

// syncFailFile fails its first fsync after arm.
type syncFailFile struct {
	vfs.File
	arm *atomic.Bool
}

func (f syncFailFile) SyncData() error {
	if f.arm.CompareAndSwap(true, false) {
		return errors.New("injected: input/output error")
	}
	return f.File.SyncData()
}

// TestJournalFsyncFailureSticks: once an fsync of the journal failed, no
// later NextReport calls the report durable (Linux may let a retried fsync
// pass with the pages gone); appends go on.
func TestJournalFsyncFailureSticks(t *testing.T) {
	var arm atomic.Bool
	baseFS = segmentFS{vfs.Default, func(f vfs.File) vfs.File { return syncFailFile{f, &arm} }}
	t.Cleanup(func() { baseFS = vfs.Default })
	l, err := Open(Config{Dir: t.TempDir(), NodeID: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	base := testBase()
	appendRange(t, l, base, 0, 5, 1)
	arm.Store(true)
	if _, err := l.NextReport(); err == nil {
		t.Fatal("NextReport returned a report whose fsync failed")
	}
	if _, err := l.NextReport(); err == nil {
		t.Fatal("the retried NextReport passed after a failed fsync")
	}
	appendRange(t, l, base, 5, 10, 1)
	_ = l.Close()
}
