// Package ledger is this node's spend ledger on local Pebble: one raw record
// per finished request, kept for a retention period and queried newest first,
// plus pending spend per key/team/model/hour and per budget period, cut into
// numbered reports that the node applies through Raft and acknowledges.
//
// Durability: Append returns once its record has been written to the
// operating system (it survives kill -9 of the process, not a machine crash);
// no caller ever waits on an fsync. A spend report is fsynced before
// NextReport first returns it. See journal.go for how.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// DefaultRetention is how long raw records are kept when Config.Retention is zero.
const DefaultRetention = 30 * 24 * time.Hour

// ErrClosed is returned by every call on a closed Ledger.
var ErrClosed = errors.New("ledger: closed")

const (
	queueLen        = 1024 // bounded queue of waiting appends: Append blocks when it is full
	maxBatch        = 512  // appends committed in one Pebble batch, at most
	defaultLimit    = 100
	maxLimit        = 10000
	cleanupInterval = time.Hour

	// Pebble reserves the memory of its live memtables (up to two in steady
	// state: one filling, one flushing) out of the block cache: the cache is
	// sized so that blockCacheSize is left for blocks. With CacheSize 16 MiB
	// and 8 MiB memtables nothing at all was cached.
	blockCacheSize = 16 << 20
	// 2 MiB memtables, not 8: the static (cgo-free) build that ships keeps
	// memtables on the Go heap, where each doubles its share of the GC
	// target. With 8 MiB the node's RSS under 32 flat-out clients was
	// 70.9 MB and it grew for minutes under steady load; with 2 MiB it
	// was 40.8 MB and level (+2 MB) after 40 s at 200 streams/s, with no
	// loss of throughput (e2e/bench scenarios c, d, j, k).
	memTableSize = 2 << 20
)

// baseFS is the file system of Pebble and the journal (tests count its
// syncs).
var baseFS = vfs.Default

// closeFlushTimeout bounds Close's wait for Pebble's flush, and then for
// Pebble's Close (tests lower it).
var closeFlushTimeout = 10 * time.Second

// writeOpts is how every ledger batch is committed to Pebble, which runs
// without its WAL: the writer's batches are in the journal first (see
// journal.go); retention's deletes are redone if a crash loses them.
var writeOpts = pebble.NoSync

// Config configures a Ledger.
type Config struct {
	Dir       string        // Pebble directory
	NodeID    string        // this node; written into every report
	Retention time.Duration // raw records older than this are deleted; zero means DefaultRetention
	Logger    *slog.Logger  // warnings (Pebble's own chatter goes to Debug); nil means slog.Default()
}

// Ledger is one node's spend ledger. Its methods are safe for concurrent use.
type Ledger struct {
	db        *pebble.DB
	j         *journal // written by the writer goroutine; sync and close from others
	log       *slog.Logger
	node      string
	retention time.Duration

	// mu guards closed and the sends on ops, so that Close can close ops
	// once no sender is left; Query holds it so that Pebble stays open.
	mu     sync.RWMutex
	closed bool
	ops    chan *op
	w      *writer // owned by the writer goroutine after Open
	ap     *applier
	wDone  chan struct{}

	minSeq    atomic.Uint64 // set by SetMinSeq
	syncedSeq atomic.Uint64 // last report seq known to be fsynced

	view unreportedView // what Unreported returns, kept by the writer

	bgCtx    context.Context // cancelled by Close; stops retention work
	bgCancel context.CancelFunc
	bgDone   chan struct{}
}

// Query selects raw records. Zero fields do not filter.
type Query struct {
	KeyID, TeamID string
	Since         time.Time // records at or after Since
	Limit         int       // at most this many; <= 0 means 100, capped at 10000
	// Model keeps only records of this model; ErrorsOnly only failed
	// requests (status 400 or above).
	Model      string
	ErrorsOnly bool
}

// MaxScanned bounds the records (or index entries) one query reads: with
// filters that match few records it returns the matches among that many
// of the newest candidates.
const MaxScanned = 100_000

// keep reports whether rec passes the filters that no index serves.
func (q Query) keep(rec *pb.SpendRecord) bool {
	return (q.TeamID == "" || rec.GetTeamId() == q.TeamID) &&
		(q.Model == "" || rec.GetModel() == q.Model) &&
		(!q.ErrorsOnly || rec.GetStatus() >= 400)
}

// Report is one spend report to apply through Raft (SpendReportCommand with
// this node's id). Rollups are sorted by hour, key, team and model; budgets by
// budget and period.
type Report struct {
	Seq     uint64
	Rollups []*pb.SpendRollup
	Budgets []*pb.BudgetUse
}

// Open opens (or creates) the ledger in cfg.Dir and loads its pending spend.
func Open(cfg Config) (*Ledger, error) {
	if cfg.Dir == "" {
		return nil, errors.New("ledger: Config.Dir is empty")
	}
	if cfg.NodeID == "" {
		return nil, errors.New("ledger: Config.NodeID is empty")
	}
	if cfg.Retention < 0 {
		return nil, fmt.Errorf("ledger: negative retention %v", cfg.Retention)
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "ledger")

	db, err := pebble.Open(cfg.Dir, pebbleOptions(baseFS, log))
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s: %w", cfg.Dir, err)
	}
	applied, err := readMetaU64(db, metaJournal)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	j, err := openJournal(baseFS, baseFS.PathJoin(cfg.Dir, journalDirName), db, applied, log)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	l := &Ledger{
		db:        db,
		j:         j,
		log:       log,
		node:      cfg.NodeID,
		retention: cfg.Retention,
		ops:       make(chan *op, queueLen),
		wDone:     make(chan struct{}),
		bgDone:    make(chan struct{}),
	}
	l.bgCtx, l.bgCancel = context.WithCancel(context.Background())
	l.ap = newApplier(db, j, log)
	l.w, err = newWriter(l)
	if err != nil {
		l.bgCancel()
		return nil, errors.Join(err, j.close(false), db.Close())
	}
	go l.ap.run()
	go l.w.run()
	go l.retain()
	return l, nil
}

// pebbleOptions are sized for a gateway node: a small block cache and
// memtables, Pebble's own logging at Debug, its warnings through log.
func pebbleOptions(fs vfs.FS, log *slog.Logger) *pebble.Options {
	pl := pebbleLogger{log: log}
	opts := &pebble.Options{
		FS:           fs,
		CacheSize:    blockCacheSize + 2*memTableSize,
		MemTableSize: memTableSize,
		MaxOpenFiles: 256,
		// One compaction normally, a second one while L0 or the compaction
		// debt builds up (sustained bursts), rather than stalling writes.
		CompactionConcurrencyRange: func() (int, int) { return 1, 2 },
		// The ledger's own journal is its WAL (journal.go). Pebble still
		// replays WALs that an older Tollgate left behind.
		DisableWAL:         true,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pl,
		EventListener: &pebble.EventListener{
			BackgroundError: func(err error) { log.Warn("pebble background error", "err", err) },
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				log.Error("pebble data corruption", "info", info.String())
			},
			DiskSlow: func(info pebble.DiskSlowInfo) {
				log.Warn("pebble disk slow", "info", info.String())
			},
			LowDiskSpace: func(info pebble.LowDiskSpaceInfo) {
				log.Warn("pebble low disk space", "info", info.String())
			},
			WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
				log.Warn("pebble write stall", "reason", info.Reason)
			},
			PossibleAPIMisuse: func(info pebble.PossibleAPIMisuseInfo) {
				log.Warn("pebble possible API misuse", "info", info.String())
			},
		},
	}
	// No bloom filters: Pebble consults them only for Get and SeekPrefixGE,
	// and the ledger reads with SeekGE and iterators (Get only for three
	// meta keys at Open). Building them cost a hash per key in every flush
	// and compaction for a filter utility of 0%.
	opts.Levels[0].FilterPolicy = pebble.NoFilterPolicy
	opts.Experimental.SpanPolicyFunc = recordSpans
	return opts
}

// recordSpans makes every flush and compaction end its output table where
// the raw records start and where they end, so that no table holds both
// records and other keys. Records are keyed by time: a table of new records
// overlaps only the newest record tables below it, whereas a table that
// also held the index entries and pending rows (keyed by id, spread over
// their whole range) spanned, and so rewrote, every record table in the
// level below at each compaction. BenchmarkAppendCPU: 67% fewer bytes
// compacted per record (see BENCH.md).
func recordSpans(start []byte) (pebble.SpanPolicy, []byte, error) {
	switch {
	case len(start) == 0 || start[0] < prefixRecord:
		return pebble.SpanPolicy{}, recordsStart, nil
	case start[0] == prefixRecord:
		return pebble.SpanPolicy{}, recordsEnd, nil
	}
	return pebble.SpanPolicy{}, nil, nil // to the end of the key space
}

var (
	recordsStart = []byte{prefixRecord}
	recordsEnd   = prefixEnd(prefixRecord)
)

// pebbleLogger routes Pebble's informational chatter to Debug and its
// errors to Warn.
type pebbleLogger struct{ log *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.log.Enabled(context.Background(), slog.LevelDebug) {
		p.log.Debug("pebble: " + fmt.Sprintf(format, args...))
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.log.Warn("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf must not return (Pebble calls it on broken invariants).
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	p.log.Error(msg)
	panic(msg)
}

// Append stores one finished request. It returns once the record is written
// to the operating system (survives kill -9 of the process, not a machine
// crash), committed in one batch with whatever other appends were waiting
// (group commit); the caller never waits on an fsync. The record's cost and
// tokens are added to the pending rollup of its hour, key, team and model.
//
// uses are the budget periods the request's cost counts against (may be
// empty); each adds its SpentNanos (normally rec.CostNanos) to its period's
// pending spend. rec.UnixNanos must be set; key, team, model and budget names
// must be valid UTF-8 without 0x00. The ledger keeps no reference to rec or
// uses.
func (l *Ledger) Append(rec *pb.SpendRecord, uses []*pb.BudgetUse) error {
	if err := validate(rec, uses); err != nil {
		return err
	}
	o := opPool.Get().(*op)
	o.kind, o.rec, o.uses = opAppend, rec, uses
	err := l.do(o)
	o.rec, o.uses = nil, nil
	opPool.Put(o)
	return err
}

func validate(rec *pb.SpendRecord, uses []*pb.BudgetUse) error {
	if rec == nil {
		return errors.New("ledger: nil record")
	}
	if rec.UnixNanos <= 0 {
		return fmt.Errorf("ledger: record %q: unix_nanos %d not set", rec.RequestId, rec.UnixNanos)
	}
	if !validName(rec.KeyId) || !validName(rec.TeamId) || !validName(rec.Model) {
		return fmt.Errorf("ledger: record %q: key, team or model contains 0x00", rec.RequestId)
	}
	for _, u := range uses {
		if u == nil {
			return fmt.Errorf("ledger: record %q: nil budget use", rec.RequestId)
		}
		// A name proto cannot marshal would fail the whole batch at commit.
		if u.Budget == "" || !validName(u.Budget) || !utf8.ValidString(u.Budget) || u.PeriodStart < 0 {
			return fmt.Errorf("ledger: record %q: bad budget use %q period %d", rec.RequestId, u.Budget, u.PeriodStart)
		}
	}
	return nil
}

// do hands o to the writer and waits for its result.
func (l *Ledger) do(o *op) error {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	l.ops <- o
	l.mu.RUnlock()
	return <-o.done
}

// NextReport returns the oldest report not yet acknowledged. If there is none
// and spend is pending, it first cuts one: in one Pebble batch, all pending
// rollups and budget use move into a new outbox entry with seq = max(last
// seq, SetMinSeq's min) + 1. It returns (nil, nil) when nothing is pending.
// Until AckReport, every call returns the same report (same seq, same
// content), also after a restart. A report is fsynced before it is first
// returned, so it survives even a machine crash.
func (l *Ledger) NextReport() (*Report, error) {
	o := &op{kind: opCut, done: make(chan error, 1)}
	if err := l.do(o); err != nil {
		return nil, err
	}
	rep := o.report
	if rep != nil && l.syncedSeq.Load() != rep.Seq {
		if err := l.j.sync(); err != nil {
			return nil, fmt.Errorf("ledger: sync report %d: %w", rep.Seq, err)
		}
		l.syncedSeq.Store(rep.Seq)
	}
	return rep, nil
}

// AckReport records that the report with this seq (and any older one) has
// been applied, and deletes it. Acknowledging a seq already acknowledged is a
// no-op; acknowledging a seq never cut is an error.
func (l *Ledger) AckReport(seq uint64) error {
	o := &op{kind: opAck, seq: seq, done: make(chan error, 1)}
	return l.do(o)
}

// SetMinSeq makes the next cut report's seq greater than min. The node learns
// min from Raft (the last seq the cluster applied for it), e.g. after its data
// dir was lost; call it before the first NextReport. It is kept in memory
// only (the next cut persists its seq) and does not renumber a report already
// cut: such a report is still returned, and the state machine drops it as a
// replay if it was applied.
func (l *Ledger) SetMinSeq(min uint64) {
	for {
		cur := l.minSeq.Load()
		if min <= cur || l.minSeq.CompareAndSwap(cur, min) {
			return
		}
	}
}

// Unreported returns, per budget period, the spend appended but not yet
// acknowledged (pending plus cut but unacknowledged reports), sorted by
// budget and period. The budget manager needs it after a restart.
func (l *Ledger) Unreported() []*pb.BudgetUse {
	return l.view.snapshot()
}

// Close waits for the queued appends to be committed, stops the writer and
// the retention goroutine, flushes Pebble's memtables to sstables, removes
// the journal (nothing is left to replay) and closes Pebble. If the flush
// fails or does not finish within closeFlushTimeout, the journal is
// fsynced and kept instead, for the next Open to replay. Calls after Close
// return ErrClosed; a second Close returns nil.
func (l *Ledger) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.ops)
	l.mu.Unlock()

	var errs []error
	// The writer stops once it has committed what was queued; one waiting
	// for room in the apply queue of a stalled Pebble does not hang the
	// shutdown (it is then left running, and the journal open under it).
	writerStopped := true
	select {
	case <-l.wDone:
	case <-time.After(closeFlushTimeout):
		writerStopped = false
		errs = append(errs, fmt.Errorf("ledger: the writer did not stop within %v (the journal is kept)", closeFlushTimeout))
	}
	l.bgCancel()
	select {
	case <-l.bgDone:
	case <-time.After(closeFlushTimeout):
		// A retention cleanup committing into a stalled Pebble: Pebble is
		// closed only once it returns (below).
		errs = append(errs, fmt.Errorf("ledger: retention cleanup did not stop within %v", closeFlushTimeout))
	}
	applied := false
	select {
	case <-l.ap.done:
		applied = true
	case <-time.After(closeFlushTimeout):
	}
	// Flush the memtables so that the journal can go. A flush Pebble
	// cannot finish (a full disk: it retries without end) must not hang
	// the node's shutdown: the journal is then kept, and so is everything.
	flushed := false
	var flushReturned <-chan struct{} = closedChan // closed once no flush call is in Pebble
	if err := l.ap.failed(); err != nil {
		errs = append(errs, err) // the journal holds what Pebble refused: keep it
	} else if !applied {
		// The applier skips what is still queued once the stalled commit
		// returns: the journal keeps it, and the next Open replays it.
		l.ap.abandon()
		errs = append(errs, fmt.Errorf("ledger: Pebble did not take the queued batches within %v (the journal is kept)", closeFlushTimeout))
	} else {
		var err error
		if flushReturned, err = l.flushOnClose(); err != nil {
			errs = append(errs, err)
		} else {
			flushed = true
		}
	}
	if writerStopped {
		errs = append(errs, l.w.close(), l.j.close(flushed))
	}
	done := make(chan error, 1)
	// Pebble must not be closed under a commit: wait for the applier
	// (abandoned above if it was stalled) and the retention cleanup before
	// closing it.
	go func() {
		<-l.wDone
		<-l.ap.done
		<-l.bgDone
		<-flushReturned
		done <- l.db.Close()
	}()
	select {
	case err := <-done:
		errs = append(errs, err)
	case <-time.After(closeFlushTimeout):
		errs = append(errs, fmt.Errorf("ledger: Pebble did not close within %v", closeFlushTimeout))
	}
	return errors.Join(errs...)
}

// flushOnClose flushes the memtables so that the journal can go, within
// closeFlushTimeout. Pebble's AsyncFlush itself blocks while Pebble stalls
// writes (a disk that no longer answers), so it runs in a goroutine: the
// channel returned is closed once that call has returned, and Pebble must
// not be closed before.
func (l *Ledger) flushOnClose() (<-chan struct{}, error) {
	returned := make(chan struct{})
	started := make(chan error, 1)
	var flushed <-chan struct{}
	go func() {
		defer close(returned)
		ch, err := l.db.AsyncFlush()
		flushed = ch
		started <- err
	}()
	timeout := time.After(closeFlushTimeout)
	select {
	case err := <-started:
		if err != nil {
			return returned, fmt.Errorf("ledger: flush on close (the journal is kept): %w", err)
		}
	case <-timeout:
		return returned, fmt.Errorf("ledger: flush on close did not start within %v: Pebble is stalling writes (the journal is kept)", closeFlushTimeout)
	}
	select {
	case <-flushed:
		return returned, nil
	case <-timeout:
		return returned, fmt.Errorf("ledger: flush on close did not finish within %v (the journal is kept)", closeFlushTimeout)
	}
}

// unreportedView is the budget spend not yet acknowledged, kept by the
// writer for Unreported.
type unreportedView struct {
	mu      sync.Mutex
	pending map[budgetKey]int64
	outbox  map[budgetKey]int64
}

func (v *unreportedView) snapshot() []*pb.BudgetUse {
	v.mu.Lock()
	sum := make(map[budgetKey]int64, len(v.pending)+len(v.outbox))
	for k, n := range v.pending {
		sum[k] += n
	}
	for k, n := range v.outbox {
		sum[k] += n
	}
	v.mu.Unlock()
	out := make([]*pb.BudgetUse, 0, len(sum))
	for k, n := range sum {
		if n != 0 {
			out = append(out, &pb.BudgetUse{Budget: k.budget, PeriodStart: k.period, SpentNanos: n})
		}
	}
	sortBudgets(out)
	return out
}

func sortBudgets(bs []*pb.BudgetUse) {
	sort.Slice(bs, func(i, j int) bool {
		if c := strings.Compare(bs[i].Budget, bs[j].Budget); c != 0 {
			return c < 0
		}
		return bs[i].PeriodStart < bs[j].PeriodStart
	})
}

func sortRollups(rs []*pb.SpendRollup) {
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.HourUnix != b.HourUnix {
			return a.HourUnix < b.HourUnix
		}
		if a.KeyId != b.KeyId {
			return a.KeyId < b.KeyId
		}
		if a.TeamId != b.TeamId {
			return a.TeamId < b.TeamId
		}
		return a.Model < b.Model
	})
}

// reportFromCommand converts a stored outbox entry.
func reportFromCommand(c *pb.SpendReportCommand) *Report {
	return &Report{Seq: c.Seq, Rollups: c.Rollups, Budgets: c.Budgets}
}

var unmarshal = proto.UnmarshalOptions{}
