package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// The applier commits the writer's batches to Pebble, in journal order, off
// the append path: an append is acknowledged once its frame is in the
// journal (which is what makes it survive kill -9), so a Pebble write stall
// (memtables full while a flush is slow) is absorbed by a bounded queue
// instead of stalling every request. When the queue is full the writer
// waits, and appenders with it: that is the back-pressure.

// Bounds of the apply queue (tests lower them).
var (
	applyQueueLen   = 4096
	applyQueueBytes = int64(32 << 20)
)

// applyItem is one journalled batch to commit, or (b nil) a marker after
// a journal rotation: once everything before it is in Pebble, flush, and
// then remove segs.
type applyItem struct {
	b    *pebble.Batch
	seq  uint64 // the batch's journal frame
	size int64
	segs []*segment
}

type applier struct {
	db   *pebble.DB
	j    *journal
	log  *slog.Logger
	q    chan applyItem // closed by the writer when it stops
	done chan struct{}

	mu        sync.Mutex
	cond      *sync.Cond
	n         int   // items queued
	bytes     int64 // batch bytes queued
	journaled uint64
	applied   uint64
	err       error // a batch Pebble refused: the ledger stops
	waits     int64 // times the writer waited for room
}

func newApplier(db *pebble.DB, j *journal, log *slog.Logger) *applier {
	a := &applier{db: db, j: j, log: log, q: make(chan applyItem, applyQueueLen), done: make(chan struct{})}
	a.cond = sync.NewCond(&a.mu)
	return a
}

// enqueue hands an item to the applier, waiting while the queue is full.
// Only the writer goroutine calls it.
func (a *applier) enqueue(it applyItem) {
	a.mu.Lock()
	if a.n > 0 && (a.n >= applyQueueLen || a.bytes+it.size > applyQueueBytes) {
		a.waits++
		for a.n > 0 && (a.n >= applyQueueLen || a.bytes+it.size > applyQueueBytes) {
			a.cond.Wait()
		}
	}
	a.n++
	a.bytes += it.size
	if it.b != nil {
		a.journaled = it.seq
	}
	a.mu.Unlock()
	a.q <- it
}

func (a *applier) run() {
	defer close(a.done)
	for it := range a.q {
		if it.b != nil {
			a.commit(it)
		} else if a.failed() == nil {
			a.flushThenRemove(it.segs)
		}
		a.mu.Lock()
		a.n--
		a.bytes -= it.size
		if it.b != nil {
			a.applied = it.seq
		}
		a.cond.Broadcast()
		a.mu.Unlock()
	}
}

func (a *applier) commit(it applyItem) {
	defer it.b.Close()
	if a.failed() != nil {
		return
	}
	if err := it.b.Commit(writeOpts); err != nil {
		// The frame is in the journal but not in Pebble: later batches
		// would be computed without it. Stop; a restart replays it.
		err = fmt.Errorf("ledger: stopped: journal frame %d not applied (a restart replays it): %w", it.seq, err)
		a.log.Error("ledger failed", "err", err)
		a.mu.Lock()
		a.err = err
		a.mu.Unlock()
	}
}

// flushThenRemove flushes Pebble (everything before this marker is in it)
// and removes the journal segments whose frames that flush covers.
func (a *applier) flushThenRemove(segs []*segment) {
	flushed, err := a.db.AsyncFlush()
	if err != nil {
		a.log.Warn("ledger: flush after journal rotation", "err", err)
		a.j.keep(segs)
		return
	}
	a.j.removeAfter(flushed, segs)
}

// errAbandoned stops the applier of a ledger that Close gave up waiting
// for: what is still queued stays in the journal only.
var errAbandoned = errors.New("ledger: closed before Pebble took every batch (the journal replays them on the next start)")

// abandon makes the applier skip every batch it has not started, so that
// Pebble can be closed once the one it is committing returns.
func (a *applier) abandon() {
	a.mu.Lock()
	if a.err == nil {
		a.err = errAbandoned
	}
	a.mu.Unlock()
}

func (a *applier) failed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// waitApplied waits until every batch enqueued before the call is in
// Pebble, the applier failed or stopped, or ctx ends.
func (a *applier) waitApplied(ctx context.Context) error {
	a.mu.Lock()
	target := a.journaled
	for a.applied < target && a.err == nil {
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.done:
			return a.failed()
		case <-time.After(time.Millisecond):
		}
		a.mu.Lock()
	}
	err := a.err
	a.mu.Unlock()
	return err
}

// backlog returns what waits to be committed to Pebble.
func (a *applier) backlog() (items int, bytes int64, waits int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n, a.bytes, a.waits
}

// ApplyBacklog reports the journalled batches not yet in Pebble (and their
// bytes), and how often appends had to wait because that queue was full.
// A growing backlog means Pebble is stalled (a slow disk).
func (l *Ledger) ApplyBacklog() (batches int, bytes int64, fullWaits int64) {
	return l.ap.backlog()
}

// Congested reports whether the apply queue is more than half full: the
// node should be taken out of rotation until Pebble catches up.
func (l *Ledger) Congested() bool {
	n, b, _ := l.ap.backlog()
	return n >= applyQueueLen/2 || b >= applyQueueBytes/2
}
