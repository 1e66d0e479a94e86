package ratelimit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Saved usage: what Save writes and Restore reads, so that a restarted
// node goes on counting the requests and tokens it admitted in the last
// minute instead of starting from zero (and its peers, which take its
// next report for its whole usage, with it).
//
//	version  byte (savedVersion)
//	savedAt  varint: wall clock of the save, Unix milliseconds
//	count    uvarint: number of buckets
//	count × { bucket: uvarint length (1..MaxBucketLen) + bytes;
//	          slots: uvarint (1..windowSlots);
//	          slots × { start: varint, wall clock of the second's start,
//	                    Unix milliseconds; requests, tokens: uvarint (≤ maxValue) } }
//
// In-flight counts are not saved: the requests died with the process.
const savedVersion = 1

var errSavedMalformed = errors.New("ratelimit: malformed saved usage")

// Save returns this node's own usage still in the window: for every bucket,
// the requests and tokens of each second that counts. Buckets whose id is
// longer than MaxBucketLen are left out. It takes each shard's lock in
// turn, briefly.
func (l *Limiter) Save() []byte {
	t := l.clock()
	cur := t / int64(time.Second)
	startMs := l.startWallMs(t)
	count := 0
	body := make([]byte, 0, l.saveSize.Load()*9/8) // the last size and some: no regrowing
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for _, b := range s.buckets {
			if len(b.id) == 0 || len(b.id) > MaxBucketLen {
				continue
			}
			b.advance(cur)
			if b.reqSum == 0 && b.tokSum == 0 {
				continue
			}
			body = binary.AppendUvarint(body, uint64(len(b.id)))
			body = append(body, b.id...)
			nAt := len(body)
			body = append(body, 0) // the slot count, at most 60: one byte
			n := byte(0)
			for sec := max(b.head-windowSlots+1, 0); sec <= b.head; sec++ {
				i := sec % windowSlots
				if b.req[i] == 0 && b.tok[i] == 0 {
					continue
				}
				body = binary.AppendVarint(body, startMs+sec*1000)
				body = binary.AppendUvarint(body, uint64(clampValue(b.req[i])))
				body = binary.AppendUvarint(body, uint64(clampValue(b.tok[i])))
				n++
			}
			body[nAt] = n
			count++
		}
		s.mu.Unlock()
	}
	l.saveSize.Store(int64(len(body)))
	buf := append(make([]byte, 0, 24+len(body)), savedVersion)
	buf = binary.AppendVarint(buf, l.now().UnixMilli())
	buf = binary.AppendUvarint(buf, uint64(count))
	return append(buf, body...)
}

// savedSlot is one second of restored usage.
type savedSlot struct {
	startMs  int64
	req, tok int64
}

// Restore adds usage saved by Save, by this process or an earlier one, to
// this node's own windows. Each second's requests and tokens count in the
// second of this limiter that holds the same wall-clock time (rounded
// later, never earlier), so they leave the window when they would have;
// seconds already out of the window are dropped, and a second stamped in
// the future (the clock was set back) counts as now. It checks the whole
// input before it applies anything, and returns how many buckets got
// usage. Call it before the node serves; it may also run later.
func (l *Limiter) Restore(saved []byte) (int, error) {
	buckets, err := decodeSaved(saved)
	if err != nil {
		return 0, err
	}
	t := l.clock()
	cur := t / int64(time.Second)
	startMs := l.startWallMs(t)
	restored := 0
	for _, sb := range buckets {
		if l.restoreBucket(sb, cur, startMs) {
			restored++
		}
	}
	if restored > 0 {
		l.resync.Store(true) // tell peers at once
	}
	return restored, nil
}

// savedBucket is one bucket's slots as Save wrote them.
type savedBucket struct {
	id    string
	slots []savedSlot
}

// decodeSaved parses what Save wrote, rejecting anything malformed as a whole.
func decodeSaved(saved []byte) ([]savedBucket, error) {
	if len(saved) == 0 {
		return nil, errSavedMalformed
	}
	if saved[0] != savedVersion {
		return nil, fmt.Errorf("ratelimit: unsupported saved usage version %d", saved[0])
	}
	d := decoder{b: saved, off: 1}
	d.varint() // savedAt: the slots carry their own times
	count := d.uvarint()
	if d.err != nil || count > uint64(len(saved)-d.off)/5 {
		return nil, errSavedMalformed
	}
	buckets := make([]savedBucket, 0, count)
	for range count {
		id := d.bytes(MaxBucketLen)
		n := d.uvarint()
		if d.err != nil || len(id) == 0 || n == 0 || n > windowSlots {
			return nil, errSavedMalformed
		}
		sb := savedBucket{id: string(id), slots: make([]savedSlot, n)}
		for i := range sb.slots {
			sb.slots[i] = savedSlot{startMs: d.varint(), req: d.value(), tok: d.value()}
		}
		if d.err != nil {
			return nil, errSavedMalformed
		}
		buckets = append(buckets, sb)
	}
	if d.off != len(saved) {
		return nil, errSavedMalformed
	}
	return buckets, nil
}

// restoreBucket adds the saved slots of sb that still fall in the window to its bucket,
// given cur (this limiter's current second) and startMs (its start in wall-clock Unix ms),
// and reports whether any did.
func (l *Limiter) restoreBucket(sb savedBucket, cur, startMs int64) bool {
	type slotAt struct{ sec, req, tok int64 } // sec: this limiter's second
	var keep []slotAt
	for _, s := range sb.slots {
		if s.startMs <= startMs || (s.req == 0 && s.tok == 0) {
			continue // before the limiter's start: a window ago at least
		}
		// The second this limiter counts that wall time in, rounded
		// up; one in the future counts as now.
		rel := min(ceilDiv(s.startMs-startMs, 1000), cur)
		if rel <= cur-windowSlots {
			continue
		}
		keep = append(keep, slotAt{rel, s.req, s.tok})
	}
	if len(keep) == 0 {
		return false
	}
	sh := &l.shards[l.shardOf(sb.id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.buckets[sb.id]
	if b == nil {
		b = newBucket(sb.id, cur)
		sh.buckets[sb.id] = b
	}
	b.advance(cur)
	added := false
	for _, s := range keep {
		// An Admit since cur was read may have moved the window on.
		sec := min(s.sec, b.head)
		if !b.inWindow(sec) {
			continue
		}
		i := sec % windowSlots
		req, tok := min(s.req, math.MaxInt64/4-b.req[i]), min(s.tok, math.MaxInt64/4-b.tok[i])
		b.req[i] += req
		b.tok[i] += tok
		b.reqSum += req
		b.tokSum += tok
		added = true
	}
	if added {
		b.zeroSince = -1
	}
	return added
}

// startWallMs is the wall-clock time of the limiter's start as the wall
// clock reads now (Unix ms), given t = clock(): the clock counts on the
// monotonic clock, so a wall-clock step since New (NTP at boot, a VM
// resumed) must not shift the times Save writes and Restore reads.
func (l *Limiter) startWallMs(t int64) int64 {
	return l.now().UnixMilli() - t/int64(time.Millisecond)
}

// ceilDiv is a/b rounded toward +∞ (b > 0).
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a > 0 {
		q++
	}
	return q
}
