package ledger

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// retain deletes expired records once at Open and then every hour, until
// Close cancels bgCtx.
func (l *Ledger) retain() {
	defer close(l.bgDone)
	t := time.NewTicker(cleanupInterval)
	defer t.Stop()
	for {
		if err := l.cleanup(time.Now()); err != nil && l.bgCtx.Err() == nil {
			l.log.Warn("ledger retention cleanup failed", "err", err)
		}
		select {
		case <-l.bgCtx.Done():
			return
		case <-t.C:
		}
	}
}

// cleanup deletes, with range deletions in one batch, the raw records older
// than now - retention and their index entries. The records go in one range;
// the indexes are walked by a skip scan, one seek per distinct key or team,
// and get one range per id that has expired entries. Its cost grows with the
// number of distinct ids, not with the number of records.
func (l *Ledger) cleanup(now time.Time) (err error) {
	cutoff := now.Add(-l.retention).UnixNano()
	if cutoff <= 0 {
		return nil
	}
	// Records appended so far must be in Pebble to be found old.
	if err := l.ap.waitApplied(l.bgCtx); err != nil {
		return err
	}
	b := l.db.NewBatch()
	defer func() { err = errors.Join(err, b.Close()) }()

	oldest, err := l.firstKey([]byte{prefixRecord}, prefixEnd(prefixRecord))
	if err != nil {
		return err
	}
	if oldest != nil {
		nanos, _, err := decodeRecordKey(oldest)
		if err != nil {
			return err
		}
		if nanos < cutoff {
			if err := b.DeleteRange(appendRecordKey(nil, 0, 0), appendRecordKey(nil, cutoff, 0), nil); err != nil {
				return err
			}
		}
	}
	for _, p := range []byte{prefixKeyIndex, prefixTeamIndex} {
		if err := l.expireIndex(b, p, cutoff); err != nil {
			return err
		}
	}
	if b.Empty() {
		return nil
	}
	if err := b.Commit(writeOpts); err != nil {
		return fmt.Errorf("ledger: retention: %w", err)
	}
	return nil
}

// firstKey returns a copy of the first key in [lower, upper), or nil.
func (l *Ledger) firstKey(lower, upper []byte) (k []byte, err error) {
	it, err := l.db.NewIterWithContext(l.bgCtx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	if it.First() {
		k = clone(it.Key())
	}
	return k, it.Error()
}

// expireIndex adds to b a range deletion of the expired entries of every id
// in one index. The entries of an id are in time order, so the first one
// seen for an id is its oldest: ids with nothing expired get no tombstone.
func (l *Ledger) expireIndex(b *pebble.Batch, prefix byte, cutoff int64) (err error) {
	it, err := l.db.NewIterWithContext(l.bgCtx, &pebble.IterOptions{
		LowerBound: []byte{prefix},
		UpperBound: prefixEnd(prefix),
	})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	for valid := it.First(); valid; {
		if err := l.bgCtx.Err(); err != nil {
			return err
		}
		id, nanos, _, err := decodeIndexKey(it.Key(), prefix)
		if err != nil {
			return err
		}
		if nanos < cutoff {
			idStr := string(id)
			lo := appendIndexKey(nil, prefix, idStr, 0, 0)
			hi := appendIndexKey(nil, prefix, idStr, cutoff, 0)
			if err := b.DeleteRange(lo, hi, nil); err != nil {
				return err
			}
		}
		valid = it.SeekGE(indexIDEnd(prefix, id))
	}
	return it.Error()
}
