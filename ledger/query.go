package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// scan calls fn for every key in [lower, upper), in order. fn must not keep
// k or v.
func scan(ctx context.Context, db *pebble.DB, lower, upper []byte, fn func(k, v []byte) error) (err error) {
	it, err := db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("ledger: scan %q: %w", lower, err)
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	for valid := it.First(); valid; valid = it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("ledger: read %q: %w", it.Key(), err)
		}
		if err := fn(it.Key(), v); err != nil {
			return err
		}
	}
	return it.Error()
}

// Query returns raw records, newest first. With KeyID it walks the index by
// key, else with TeamID the index by team, else the records themselves; in
// each case it reads about Limit entries from the newest one backwards,
// whatever the ledger's size.
func (l *Ledger) Query(ctx context.Context, q Query) ([]*pb.SpendRecord, error) {
	if !validName(q.KeyID) || !validName(q.TeamID) {
		return nil, errors.New("ledger: query key or team contains 0x00")
	}
	limit := q.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	limit = min(limit, maxLimit)
	var since int64
	if !q.Since.IsZero() {
		since = max(q.Since.UnixNano(), 0)
	}

	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, ErrClosed
	}
	// What was appended before the call is in the journal; wait until
	// Pebble holds it too (at once, unless Pebble is stalled).
	if err := l.ap.waitApplied(ctx); err != nil {
		return nil, err
	}
	q.Limit = limit
	switch {
	case q.KeyID != "":
		return l.queryIndex(ctx, prefixKeyIndex, q.KeyID, since, q)
	case q.TeamID != "":
		return l.queryIndex(ctx, prefixTeamIndex, q.TeamID, since, q)
	default:
		return l.queryRecords(ctx, since, q)
	}
}

func (l *Ledger) queryRecords(ctx context.Context, since int64, q Query) (out []*pb.SpendRecord, err error) {
	it, err := l.db.NewIterWithContext(ctx, &pebble.IterOptions{
		LowerBound: appendRecordKey(nil, since, 0),
		UpperBound: prefixEnd(prefixRecord),
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: query: %w", err)
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	budget := MaxScanned
	for valid := it.Last(); valid && len(out) < q.Limit && budget > 0; valid = it.Prev() {
		budget--
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, _, err := decodeRecordKey(it.Key()); err != nil {
			return nil, err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("ledger: query: read %q: %w", it.Key(), err)
		}
		rec := &pb.SpendRecord{}
		if err := unmarshal.Unmarshal(v, rec); err != nil {
			return nil, fmt.Errorf("ledger: query: record %q: %w", it.Key(), err)
		}
		if q.keep(rec) {
			out = append(out, rec)
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("ledger: query: %w", err)
	}
	return out, nil
}

// queryIndex walks the index entries of id backwards and reads the records
// they point at with a second iterator. Entries whose record is gone
// (retention deletes records first) are skipped. q's other filters (a team
// for records found by key, model, errors) apply to the records found.
func (l *Ledger) queryIndex(ctx context.Context, prefix byte, id string, since int64, q Query) (out []*pb.SpendRecord, err error) {
	idx, err := l.db.NewIterWithContext(ctx, &pebble.IterOptions{
		LowerBound: appendIndexKey(nil, prefix, id, since, 0),
		UpperBound: indexIDEnd(prefix, []byte(id)),
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: query: %w", err)
	}
	defer func() { err = errors.Join(err, idx.Close()) }()
	recs, err := l.db.NewIterWithContext(ctx, &pebble.IterOptions{
		LowerBound: appendRecordKey(nil, since, 0),
		UpperBound: prefixEnd(prefixRecord),
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: query: %w", err)
	}
	defer func() { err = errors.Join(err, recs.Close()) }()

	var rk []byte
	budget := MaxScanned
	for valid := idx.Last(); valid && len(out) < q.Limit && budget > 0; valid = idx.Prev() {
		budget--
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		_, nanos, suffix, err := decodeIndexKey(idx.Key(), prefix)
		if err != nil {
			return nil, err
		}
		rk = appendRecordKey(rk[:0], nanos, suffix)
		if !recs.SeekGE(rk) || !bytes.Equal(recs.Key(), rk) {
			if err := recs.Error(); err != nil {
				return nil, fmt.Errorf("ledger: query: %w", err)
			}
			continue // record gone
		}
		v, err := recs.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("ledger: query: read %q: %w", rk, err)
		}
		rec := &pb.SpendRecord{}
		if err := unmarshal.Unmarshal(v, rec); err != nil {
			return nil, fmt.Errorf("ledger: query: record %q: %w", rk, err)
		}
		if q.keep(rec) {
			out = append(out, rec)
		}
	}
	if err := idx.Error(); err != nil {
		return nil, fmt.Errorf("ledger: query: %w", err)
	}
	return out, nil
}
