package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The journal is the ledger's write-ahead log; Pebble runs with DisableWAL.
//
// Why not Pebble's WAL: a commit that must reach the OS (pebble.Sync, with
// the fsync itself skipped) is written by Pebble's WAL flush goroutine, so
// every commit cost the writer a hand-off to that goroutine and back: two
// thread wake-ups per request on the proxy's critical path. The journal is
// written by the writer goroutine itself, in one write(2) per batch.
//
// Layout: <ledger dir>/journal/<first seq, 20 digits>.jnl segments. A frame
// is
//
//	crc32c u32 | length u32 | seq u64 | payload (a Pebble batch's Repr)
//
// with the CRC (Castagnoli) over length, seq and payload, all big-endian.
// Seqs are consecutive from 1, across segments. Every batch the writer
// commits also sets the meta key "journal" to its own frame's seq, so Pebble
// knows the last frame it holds, whether from its memtable or a flushed
// table.
//
// Order per batch: the frame is written, then the batch is applied to
// Pebble's memtable (pebble.NoSync; no WAL). A crash loses the memtables;
// Open applies again, in order, the frames after the seq Pebble holds.
//
// Replay stops at the first frame that is cut short or fails its CRC, or
// whose seq is not the next one. A bad frame at the end of a segment is a
// write that failed or a crash mid-write (the writer starts a new segment
// after a failed write, and never reuses the seq): replay goes on with the
// next segment if it starts with the next seq. Anything else (a gap; a
// segment after a bad frame that does not start with the next seq) is data
// that cannot be applied in order: those segments are renamed *.discarded,
// with a warning, and the ledger holds a consistent prefix.
//
// Segments rotate at segmentSize. After a rotation the writer asks Pebble
// for a flush (AsyncFlush); once it is done, every older segment is
// removed: its frames are in sstables, which Pebble syncs. A rotated
// segment is fsynced and closed by a goroutine of its own; sync (called by
// NextReport for a newly cut report) fsyncs the current segment and waits
// for those. Ledger.Close flushes Pebble and removes every segment, so a
// clean restart replays nothing.

const (
	journalDirName = "journal"
	segmentExt     = ".jnl"
	discardedExt   = ".discarded"
	frameHeaderLen = 16
	maxFrameLen    = 1 << 30
)

// segmentSize is the size at which the writer starts a new segment (tests
// lower it).
var segmentSize int64 = 4 << 20

// flushOnRotate: after a rotation, flush Pebble and remove the old segments
// (tests turn it off to keep segments).
var flushOnRotate = true

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segment is one journal file. A rotated segment's file is fsynced and
// closed in the background; synced is closed then, with err set.
type segment struct {
	name   string // base name
	first  uint64 // seq of its first frame (from the name)
	f      vfs.File
	users  sync.WaitGroup // syncers using f; the closer waits for them
	synced chan struct{}
	err    error
	gone   bool // removal started
}

type journal struct {
	fs  vfs.FS
	dir string
	log *slog.Logger

	// Owned by the writer goroutine (and Open/Close).
	next   uint64 // seq of the next frame
	size   int64  // bytes in the current segment
	broken error  // the last write failed and no new segment could be made
	buf    []byte

	mu      sync.Mutex
	cur     *segment
	old     []*segment // rotated and not yet removed, oldest first
	closed  bool
	syncErr error          // a failed fsync of a current segment: sticky
	dirGen  uint64         // bumped by every segment created (a directory change)
	stop    chan struct{}  // closed by close: removal goroutines give up
	bg      sync.WaitGroup // closer and removal goroutines

	dirMu     sync.Mutex // serialises directory fsyncs
	dirSynced uint64     // dirGen covered by the last directory fsync
}

func segmentName(first uint64) string { return fmt.Sprintf("%020d%s", first, segmentExt) }

func parseSegmentName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, segmentExt)
	if !ok || len(s) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && n > 0
}

// openJournal replays the journal in dir into db, which holds every frame up
// to applied, and starts a new segment for the frames to come.
func openJournal(fs vfs.FS, dir string, db *pebble.DB, applied uint64, log *slog.Logger) (*journal, error) {
	j := &journal{fs: fs, dir: dir, log: log, stop: make(chan struct{})}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("ledger: journal dir: %w", err)
	}
	// The journal directory's own entry, for a fresh or upgraded data dir.
	if err := syncDir(fs, fs.PathDir(dir)); err != nil {
		return nil, fmt.Errorf("ledger: sync data dir: %w", err)
	}
	next, err := j.replay(db, applied)
	if err != nil {
		return nil, err
	}
	// What replay kept may be only in the page cache of a killed process:
	// make it durable before frames that follow it are written, or a later
	// power loss could keep those and lose these. Likewise the renames of
	// discarded segments.
	for _, s := range j.old {
		if err := j.fsyncFile(s.name); err != nil {
			return nil, err
		}
	}
	if err := syncDir(fs, dir); err != nil {
		return nil, fmt.Errorf("ledger: sync journal dir: %w", err)
	}
	j.next = next
	s, err := j.create()
	if err != nil {
		return nil, err
	}
	j.cur = s
	return j, nil
}

// replay applies the frames after applied, in seq order, and returns the
// seq the next frame gets. Segments it keeps are listed in j.old.
func (j *journal) replay(db *pebble.DB, applied uint64) (uint64, error) {
	names, err := j.fs.List(j.dir)
	if err != nil {
		return 0, fmt.Errorf("ledger: list journal: %w", err)
	}
	var segs []*segment
	for _, n := range names {
		if first, ok := parseSegmentName(n); ok {
			segs = append(segs, &segment{name: n, first: first})
		}
	}
	slices.SortFunc(segs, func(a, b *segment) int { return cmpU64(a.first, b.first) })

	next := applied + 1
	discard := "" // why the segments from here on cannot be applied
	replayed := 0
	for i, s := range segs {
		if discard == "" && s.first > next {
			discard = fmt.Sprintf("it starts at frame %d, frame %d was due", s.first, next)
		}
		if discard != "" {
			j.log.Warn("ledger journal: segment discarded: its frames do not follow those before it",
				"segment", s.name, "reason", discard)
			path := j.fs.PathJoin(j.dir, s.name)
			if err := j.fs.Rename(path, path+discardedExt); err != nil {
				return 0, fmt.Errorf("ledger: discard journal segment: %w", err)
			}
			continue
		}
		data, err := j.readAll(s.name)
		if err != nil {
			return 0, err
		}
		// A later segment takes over from its first seq: frames of this
		// one from there on were abandoned writes (see write).
		limit := uint64(math.MaxUint64)
		if i+1 < len(segs) {
			limit = segs[i+1].first
		}
		n, after, stopped, err := replaySegment(db, s.name, data, next, limit)
		if err != nil {
			return 0, err
		}
		if stopped != "" {
			// The rest of this segment is a write that never completed; a
			// later segment may go on from here (see above).
			j.log.Warn("ledger journal: segment ends early", "segment", s.name, "reason", stopped)
		}
		replayed += n
		next = after
		// Its frames are in Pebble's memtable: keep it until a flush.
		s.synced = closedChan
		j.old = append(j.old, s)
	}
	if replayed > 0 {
		j.log.Info("ledger journal replayed", "frames", replayed, "next_seq", next)
	}
	return next, nil
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (j *journal) fsyncFile(name string) error {
	f, err := j.fs.Open(j.fs.PathJoin(j.dir, name))
	if err != nil {
		return fmt.Errorf("ledger: open journal segment: %w", err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("ledger: fsync journal segment %s: %w", name, err)
	}
	return nil
}

func (j *journal) readAll(name string) ([]byte, error) {
	f, err := j.fs.Open(j.fs.PathJoin(j.dir, name))
	if err != nil {
		return nil, fmt.Errorf("ledger: open journal segment: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("ledger: read journal segment %s: %w", name, err)
	}
	return data, nil
}

// replaySegment applies data's frames numbered next and on, below limit. It
// returns how many it applied, the seq after the last one, and why it
// stopped before the end ("" if it did not).
func replaySegment(db *pebble.DB, name string, data []byte, next, limit uint64) (n int, _ uint64, stopped string, _ error) {
	for off := 0; off < len(data); {
		seq, payload, size, bad := readFrame(data[off:])
		if bad != "" {
			return n, next, fmt.Sprintf("%s at offset %d of %s", bad, off, name), nil
		}
		off += size
		switch {
		case seq >= limit:
			return n, next, fmt.Sprintf("frame %d is superseded by the next segment", seq), nil
		case seq < next:
			continue // already in Pebble
		case seq > next:
			return n, next, fmt.Sprintf("frame %d where %d was due, in %s", seq, next, name), nil
		}
		b := db.NewBatch()
		if err := b.SetRepr(payload); err != nil {
			b.Close()
			return n, next, fmt.Sprintf("frame %d: %v", seq, err), nil
		}
		if err := db.Apply(b, pebble.NoSync); err != nil {
			b.Close()
			return n, next, "", fmt.Errorf("ledger: replay journal frame %d: %w", seq, err)
		}
		b.Close()
		n++
		next++
	}
	return n, next, "", nil
}

// readFrame decodes the frame at the start of b; bad says why it cannot.
func readFrame(b []byte) (seq uint64, payload []byte, size int, bad string) {
	if len(b) < frameHeaderLen {
		return 0, nil, 0, "cut header"
	}
	sum := binary.BigEndian.Uint32(b[0:4])
	n := binary.BigEndian.Uint32(b[4:8])
	if n > maxFrameLen || int(n) > len(b)-frameHeaderLen {
		return 0, nil, 0, "cut frame"
	}
	size = frameHeaderLen + int(n)
	if crc32.Checksum(b[4:size], castagnoli) != sum {
		return 0, nil, 0, "checksum mismatch"
	}
	return binary.BigEndian.Uint64(b[8:16]), b[frameHeaderLen:size], size, ""
}

// create makes the segment whose first frame is j.next; the caller makes it
// current.
func (j *journal) create() (*segment, error) {
	name := segmentName(j.next)
	path := j.fs.PathJoin(j.dir, name)
	if fi, err := j.fs.Stat(path); err == nil {
		// A segment whose first frame was never written whole (a failed
		// write, a crash mid-write, or none at all): nothing in it is in
		// order. An empty one goes; anything else is set aside.
		if fi.Size() == 0 {
			err = j.fs.Remove(path)
		} else {
			err = j.fs.Rename(path, path+discardedExt)
		}
		if err != nil {
			return nil, fmt.Errorf("ledger: discard journal segment: %w", err)
		}
		j.mu.Lock()
		j.old = slices.DeleteFunc(j.old, func(s *segment) bool { return s.name == name })
		j.mu.Unlock()
	}
	f, err := j.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("ledger: create journal segment: %w", err)
	}
	j.mu.Lock()
	j.dirGen++
	j.mu.Unlock()
	j.size = 0
	return &segment{name: name, first: j.next, f: f, synced: make(chan struct{})}, nil
}

// write appends b's frame (b's Repr, numbered j.next) in one write and
// advances j.next. After a failed write the segment is abandoned at once: a
// new one, named by the same seq, supersedes whatever of the frame reached
// the file (replay reads a segment only up to the next one's first seq),
// and the next frame goes there.
func (j *journal) write(repr []byte) error {
	if j.broken != nil || j.cur == nil {
		if err := j.rotate(); err != nil {
			return fmt.Errorf("ledger: journal: %w (after %w)", err, j.broken)
		}
		j.broken = nil
	}
	if len(repr) > maxFrameLen {
		return fmt.Errorf("ledger: journal frame of %d bytes", len(repr))
	}
	need := frameHeaderLen + len(repr)
	if cap(j.buf) < need {
		j.buf = make([]byte, need, need+need/4)
	}
	buf := j.buf[:need]
	binary.BigEndian.PutUint32(buf[4:8], uint32(len(repr)))
	binary.BigEndian.PutUint64(buf[8:16], j.next)
	copy(buf[frameHeaderLen:], repr)
	binary.BigEndian.PutUint32(buf[0:4], crc32.Checksum(buf[4:], castagnoli))
	if _, err := j.cur.f.Write(buf); err != nil {
		j.broken = err
		if rerr := j.rotate(); rerr == nil {
			j.broken = nil
		}
		return fmt.Errorf("ledger: write journal: %w", err)
	}
	j.next++
	j.size += int64(need)
	if cap(j.buf) > 4<<20 {
		j.buf = nil // one big batch does not pin its buffer
	}
	return nil
}

// full reports whether the current segment should be rotated.
func (j *journal) full() bool { return j.size >= segmentSize }

// rotate starts a new segment at j.next; the current one is fsynced and
// closed in the background and joins j.old.
func (j *journal) rotate() error {
	j.mu.Lock()
	prev := j.cur
	j.mu.Unlock()
	if prev != nil && prev.first == j.next {
		// Not one frame was written to it whole: create renames it aside.
		j.mu.Lock()
		j.cur = nil
		j.mu.Unlock()
		j.bg.Add(1)
		go func() { defer j.bg.Done(); j.closeSegment(prev) }()
		prev = nil
	}
	s, err := j.create()
	if err != nil {
		return err
	}
	j.mu.Lock()
	j.cur = s
	if prev != nil {
		j.old = append(j.old, prev)
	}
	j.mu.Unlock()
	if prev != nil {
		j.bg.Add(1)
		go func() { defer j.bg.Done(); j.closeSegment(prev) }()
	}
	return nil
}

// closeSegment fsyncs and closes a rotated segment once no syncer uses it.
func (j *journal) closeSegment(s *segment) {
	s.users.Wait()
	s.err = errors.Join(s.f.SyncData(), s.f.Close())
	close(s.synced)
}

// takeOld returns the rotated segments not yet due for removal and marks
// them due: every frame they hold has been written.
func (j *journal) takeOld() []*segment {
	j.mu.Lock()
	defer j.mu.Unlock()
	var segs []*segment
	for _, s := range j.old {
		if !s.gone {
			s.gone = true
			segs = append(segs, s)
		}
	}
	return segs
}

// keep undoes takeOld for segments that cannot be removed yet.
func (j *journal) keep(segs []*segment) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, s := range segs {
		s.gone = false
	}
}

// removeAfter removes segs once flushed is closed: Pebble has then written
// everything they hold to sstables.
func (j *journal) removeAfter(flushed <-chan struct{}, segs []*segment) {
	if len(segs) == 0 {
		return
	}
	j.bg.Add(1)
	go func() {
		defer j.bg.Done()
		select {
		case <-flushed:
		case <-j.stop:
			j.keep(segs)
			return
		}
		j.remove(segs)
	}()
}

// remove deletes segments whose frames are all in Pebble's sstables.
func (j *journal) remove(segs []*segment) {
	for _, s := range segs {
		<-s.synced
		if err := j.fs.Remove(j.fs.PathJoin(j.dir, s.name)); err != nil {
			j.log.Warn("ledger journal: remove segment", "segment", s.name, "err", err)
		}
	}
	j.mu.Lock()
	j.old = slices.DeleteFunc(j.old, func(s *segment) bool { return slices.Contains(segs, s) })
	j.mu.Unlock()
}

// sync makes every frame written before the call durable: it fsyncs the
// current segment (and the directory, if a segment was created since) and
// waits for the rotated ones to be fsynced. Any goroutine may call it. A
// failed fsync of the current segment fails every later sync too: after
// one, Linux may report the next as fine with the pages gone.
func (j *journal) sync() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	if j.syncErr != nil {
		err := j.syncErr
		j.mu.Unlock()
		return err
	}
	cur := j.cur
	if cur != nil {
		cur.users.Add(1)
	}
	old := slices.Clone(j.old)
	gen := j.dirGen
	j.mu.Unlock()

	var errs []error
	if cur != nil {
		if err := cur.f.SyncData(); err != nil {
			err = fmt.Errorf("ledger: fsync journal segment %s: %w", cur.name, err)
			j.log.Error("ledger journal: fsync failed; spend reports stop until a restart", "err", err)
			j.mu.Lock()
			j.syncErr = err
			j.mu.Unlock()
			errs = append(errs, err)
		}
		cur.users.Done()
	}
	for _, s := range old {
		<-s.synced
		errs = append(errs, s.err)
	}
	j.dirMu.Lock()
	if j.dirSynced < gen {
		if err := syncDir(j.fs, j.dir); err != nil {
			errs = append(errs, err)
		} else {
			j.dirSynced = gen
		}
	}
	j.dirMu.Unlock()
	return errors.Join(errs...)
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// close ends the journal. If flushed, Pebble holds every frame in its
// sstables and all segments are removed; otherwise they are fsynced and
// kept for the next Open to replay.
func (j *journal) close(flushed bool) error {
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	close(j.stop)
	errs := []error{j.closeFiles()}
	if flushed {
		j.mu.Lock()
		segs := append(slices.Clone(j.old), j.cur)
		j.mu.Unlock()
		for _, s := range segs {
			if s == nil {
				continue
			}
			if err := j.fs.Remove(j.fs.PathJoin(j.dir, s.name)); err != nil && !isNotExist(err) {
				errs = append(errs, err)
			}
		}
	} else {
		errs = append(errs, syncDir(j.fs, j.dir))
	}
	return errors.Join(errs...)
}

// closeFiles fsyncs and closes the current segment and waits for the
// background goroutines.
func (j *journal) closeFiles() error {
	j.bg.Wait()
	j.mu.Lock()
	cur := j.cur
	j.mu.Unlock()
	var err error
	if cur != nil && cur.f != nil {
		cur.users.Wait() // a sync in progress (none can start: closed is set)
		err = errors.Join(cur.f.SyncData(), cur.f.Close())
		cur.f = nil
	}
	j.mu.Lock()
	for _, s := range j.old {
		if s.err != nil {
			err = errors.Join(err, s.err)
			s.err = nil
		}
	}
	j.mu.Unlock()
	return err
}

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
