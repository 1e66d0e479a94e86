// Package ratelimit enforces requests-per-minute, tokens-per-minute and
// concurrency limits that hold across a cluster of Tollgate nodes.
//
// Every node decides locally, without a round trip: its view of a bucket's
// cluster-wide usage is its own sliding window plus the latest window sums
// the other live nodes reported over gossip. The node package moves the
// gossip (Delta/Merge every ~100 ms, FullState/MergeFull on push-pull) and
// the membership (SetMembers); this package never does I/O. See DESIGN.md
// for the bounds this gives.
package ratelimit

import (
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

const (
	windowSlots = 60 // one-second slots in a sliding minute
	slotNanos   = int64(time.Second)
	windowNanos = windowSlots * slotNanos

	numShards = 64 // bucket shards; a power of two ≤ 64 (lock sets are uint64 masks)

	defaultStaleAfter = 2 * time.Second
	parallelRetry     = time.Second

	inlineBuckets = 4 // buckets a Ticket holds without a second allocation
)

// Reasons a request is refused (Refusal.Reason).
const (
	ReasonRPM      = "rpm"
	ReasonTPM      = "tpm"
	ReasonParallel = "parallel"
)

// Limits are the cluster-wide limits of one bucket; 0 means unlimited.
type Limits struct{ RPM, TPM, MaxParallel int64 }

// Check asks Admit to check and count one bucket. Bucket ids are opaque
// strings such as "key:ID", "team:ID" or "dep:ROUTE/DEPLOYMENT"; ids longer
// than MaxBucketLen bytes are enforced locally but never gossiped.
type Check struct {
	Bucket string
	Limits Limits
}

// Config configures a Limiter.
type Config struct {
	// NodeID is this node's id, as it appears in SetMembers and in gossip.
	NodeID string
	// Now is the clock; default time.Now. Tests inject a simulated clock.
	Now func() time.Time
	// StaleAfter is how long a peer may go unheard before its usage is
	// dropped from the view (and, if no peer is heard at all, before this
	// node falls back to its share). Default 2s.
	StaleAfter time.Duration
}

// Refusal says why Admit refused a request.
type Refusal struct {
	Bucket string // the bucket that refused
	Reason string // ReasonRPM, ReasonTPM or ReasonParallel
	// RetryAfter is when a retry can reasonably succeed: whole seconds,
	// at least 1s.
	RetryAfter time.Duration
	// Limit is the configured cluster-wide limit that was hit (not the
	// node's share of it).
	Limit int64
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("rate limit %s %d reached on %s; retry after %s", r.Reason, r.Limit, r.Bucket, r.RetryAfter)
}

// Status is a bucket's state for the OpenAI-style response headers
// x-ratelimit-{limit,remaining,reset}-{requests,tokens}. Limit* are the
// configured limits (0: unlimited, and then Remaining*/Reset* are 0);
// Remaining* is what this node would still admit from its current view;
// Reset* is when the usage it knows of will have left the window.
type Status struct {
	LimitRequests, RemainingRequests int64
	ResetRequests                    time.Duration
	LimitTokens, RemainingTokens     int64
	ResetTokens                      time.Duration
}

// Limiter is one node's rate limiter. All methods are safe for concurrent
// use.
type Limiter struct {
	id        string
	now       func() time.Time
	fastClock bool // now is time.Now: clock can use time.Since
	start     time.Time
	stale     int64 // ns
	refresh   int64 // ns: a bucket's report is re-sent at least this often
	beat      int64 // ns: an idle node sends a heartbeat at least this often
	seed      maphash.Seed

	shards [numShards]shard

	// mem is the current membership snapshot (hot path: atomic load).
	mem atomic.Pointer[membership]
	// lastHeard is the clock (ns since start) of the last message from a
	// member peer. Written under peersMu.
	lastHeard atomic.Int64
	// resync asks the next Delta to re-send every bucket: a peer joined or
	// came back and may lack this node's state.
	resync atomic.Bool

	peersMu sync.RWMutex
	peers   map[string]*peer

	gossipMu  sync.Mutex   // serialises Delta, FullState and SetMembers
	lastStamp int64        // last stamp sent (µs), under gossipMu
	lastEmit  int64        // clock of the last Delta that returned messages
	scratch   []entry      // Delta's reusable entry list, under gossipMu
	saveSize  atomic.Int64 // body size of the last Save, to size the next
}

type shard struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	_       [48]byte // keep shards on separate cache lines
}

// bucket is one bucket's state on this node. Guarded by its shard's mutex.
type bucket struct {
	id   string
	head int64 // newest second counted; the slots hold seconds head-59..head
	req  [windowSlots]int64
	tok  [windowSlots]int64

	reqSum, tokSum int64 // sums of the slots
	inflight       int64

	reports []report // the latest report of each peer that sent one

	// gossip bookkeeping (Delta)
	sentReq, sentTok, sentIn int64
	sentAt                   int64 // clock of the last send; 0: never
	zeroSince                int64 // clock since own usage is all zero; -1: not zero
}

// peer is another node as gossip knows it.
type peer struct {
	id        string
	lastHeard atomic.Int64 // clock of the last message; never: math.MinInt64/2
	member    atomic.Bool  // in the current SetMembers list
}

// report is the latest usage a peer reported for one bucket.
type report struct {
	p               *peer
	stamp           int64 // sender's stamp; a newer one replaces this report
	at              int64 // receiver clock when it arrived
	req, tok, inflt int64
}

// membership is an immutable snapshot of SetMembers.
type membership struct {
	ids []string // current live members, sorted, including this node
	// shareIDs is the member list shares are computed from: ids, except
	// that it does not shrink while this node hears from no peer (a node
	// that is cut off keeps dividing by the last known cluster size).
	shareIDs []string
	n        int64 // len(shareIDs)
	rank     int64 // this node's index in shareIDs
}

// share is this node's share of limit: floor(limit/n), plus one of the
// remainder slots if its rank is below limit mod n. Shares of all ranks
// sum to exactly limit.
func (m *membership) share(limit int64) int64 {
	s := limit / m.n
	if m.rank < limit%m.n {
		s++
	}
	return s
}

// New returns a Limiter. Until SetMembers is called the node considers
// itself alone (whole limits).
func New(cfg Config) *Limiter {
	fast := cfg.Now == nil
	if fast {
		cfg.Now = time.Now
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = defaultStaleAfter
	}
	l := &Limiter{
		id:        cfg.NodeID,
		now:       cfg.Now,
		fastClock: fast,
		stale:     int64(cfg.StaleAfter),
		refresh:   2 * int64(cfg.StaleAfter),
		beat:      int64(cfg.StaleAfter) / 4,
		seed:      maphash.MakeSeed(),
		peers:     map[string]*peer{},
	}
	// The clock starts a window before now, so that usage restored from
	// the last minute (Restore) has seconds of its own.
	l.start = l.now().Add(-windowSlots * time.Second)
	for i := range l.shards {
		l.shards[i].buckets = map[string]*bucket{}
	}
	self := []string{cfg.NodeID}
	l.mem.Store(&membership{ids: self, shareIDs: self, n: 1})
	l.lastHeard.Store(never)
	l.lastEmit = never
	return l
}

const never = math.MinInt64 / 2

// clock is nanoseconds since the limiter's start, one window before New
// (so it is at least 60 s). With the default clock it reads only
// the monotonic clock (time.Since), which is about half the cost of
// time.Now.
func (l *Limiter) clock() int64 {
	var d time.Duration
	if l.fastClock {
		d = time.Since(l.start)
	} else {
		d = l.now().Sub(l.start)
	}
	if d < 0 {
		d = 0
	}
	return int64(d)
}

func (l *Limiter) shardOf(bucket string) uint {
	return uint(maphash.String(l.seed, bucket) & (numShards - 1))
}

func (l *Limiter) lock(mask uint64) {
	for m := mask; m != 0; m &= m - 1 {
		l.shards[bits.TrailingZeros64(m)].mu.Lock()
	}
}

func (l *Limiter) unlock(mask uint64) {
	for m := mask; m != 0; m &= m - 1 {
		l.shards[bits.TrailingZeros64(m)].mu.Unlock()
	}
}

// isolated reports whether this node must fall back to its share: the
// cluster has more than one node and no member peer was heard within
// StaleAfter.
func (l *Limiter) isolated(m *membership, t int64) bool {
	return m.n > 1 && t-l.lastHeard.Load() > l.stale
}

func newBucket(id string, sec int64) *bucket {
	return &bucket{id: id, head: sec, zeroSince: -1}
}

// advance moves the window to second sec, expiring older slots.
func (b *bucket) advance(sec int64) {
	if sec <= b.head {
		return
	}
	if sec-b.head >= windowSlots {
		b.req = [windowSlots]int64{}
		b.tok = [windowSlots]int64{}
		b.reqSum, b.tokSum = 0, 0
	} else {
		for s := b.head + 1; s <= sec; s++ {
			i := s % windowSlots
			b.reqSum -= b.req[i]
			b.tokSum -= b.tok[i]
			b.req[i], b.tok[i] = 0, 0
		}
	}
	b.head = sec
}

// inWindow reports whether second s still has a slot.
func (b *bucket) inWindow(s int64) bool {
	return s >= 0 && s <= b.head && s > b.head-windowSlots
}

// peerSums adds up the reports of live peers: members heard within
// StaleAfter.
func (b *bucket) peerSums(t, stale int64) (req, tok, inflt int64) {
	for i := range b.reports {
		r := &b.reports[i]
		if r.p.member.Load() && t-r.p.lastHeard.Load() <= stale {
			req += r.req
			tok += r.tok
			inflt += r.inflt
		}
	}
	return
}

// retryAfter estimates when `need` units of usage will have left the
// window: from this node's own oldest slots if they hold enough, else
// assuming the rest of `used` is spread evenly over the minute.
func retryAfter(slots *[windowSlots]int64, head, t, need, used int64) time.Duration {
	var acc int64
	for s := max(head-windowSlots+1, 0); s <= head; s++ {
		if v := slots[s%windowSlots]; v > 0 {
			acc += v
			if acc >= need {
				return roundUpSecond(time.Duration((s+windowSlots)*slotNanos - t))
			}
		}
	}
	if used <= 0 || need >= used {
		return time.Duration(windowNanos)
	}
	return roundUpSecond(time.Duration(float64(windowNanos) * float64(need) / float64(used)))
}

func roundUpSecond(d time.Duration) time.Duration {
	if d <= time.Second {
		return time.Second
	}
	return (d + time.Second - 1) / time.Second * time.Second
}

// Ticket is an admitted request. Call Done exactly once when it ends
// (further calls are no-ops).
type Ticket struct {
	l       *Limiter
	mask    uint64 // shards of the buckets
	sec     int64  // second of admission
	est     int64
	buckets []*bucket
	inline  [inlineBuckets]*bucket
	done    atomic.Bool
}

// Admit checks every bucket and, only if all admit, counts the request in
// each: 1 request, estTokens tokens (reserved from an estimate), +1 in
// flight. On refusal nothing is counted. A bucket listed twice is checked
// against both Limits and counted once.
func (l *Limiter) Admit(checks []Check, estTokens int64) (*Ticket, *Refusal) {
	estTokens = clampValue(estTokens)
	t := l.clock()
	sec := t / slotNanos
	m := l.mem.Load()
	iso := l.isolated(m, t)

	var idx [8]uint8
	var mask uint64
	for i := range checks {
		s := l.shardOf(checks[i].Bucket)
		if i < len(idx) {
			idx[i] = uint8(s)
		}
		mask |= 1 << s
	}
	tk := &Ticket{l: l, mask: mask, sec: sec, est: estTokens}
	tk.buckets = tk.inline[:0]

	l.lock(mask)
	for i := range checks {
		c := &checks[i]
		var s uint
		if i < len(idx) {
			s = uint(idx[i])
		} else {
			s = l.shardOf(c.Bucket)
		}
		sh := &l.shards[s]
		b := sh.buckets[c.Bucket]
		if b == nil {
			b = newBucket(c.Bucket, sec)
			sh.buckets[c.Bucket] = b
		}
		b.advance(sec)
		if r := l.check(b, c, estTokens, t, m, iso); r != nil {
			l.unlock(mask)
			return nil, r
		}
		dup := false
		for _, o := range tk.buckets {
			if o == b {
				dup = true
				break
			}
		}
		if !dup {
			tk.buckets = append(tk.buckets, b)
		}
	}
	for _, b := range tk.buckets {
		s := sec
		if !b.inWindow(s) { // the clock went back by more than a window
			s = b.head
		}
		i := s % windowSlots
		b.req[i]++
		b.reqSum++
		b.tok[i] += estTokens
		b.tokSum += estTokens
		b.inflight++
	}
	l.unlock(mask)
	return tk, nil
}

// check applies c's limits to b. Caller holds b's shard lock and has
// advanced b.
func (l *Limiter) check(b *bucket, c *Check, est, t int64, m *membership, iso bool) *Refusal {
	lim := c.Limits
	if lim.RPM <= 0 && lim.TPM <= 0 && lim.MaxParallel <= 0 {
		return nil
	}
	var pReq, pTok, pIn int64
	if !iso {
		pReq, pTok, pIn = b.peerSums(t, l.stale)
	}
	if lim.RPM > 0 {
		limit := lim.RPM
		if iso {
			limit = m.share(limit)
		}
		if used := b.reqSum + pReq; used+1 > limit {
			return &Refusal{Bucket: c.Bucket, Reason: ReasonRPM, Limit: lim.RPM,
				RetryAfter: retryAfter(&b.req, b.head, t, used+1-limit, used)}
		}
	}
	if lim.TPM > 0 {
		limit := lim.TPM
		if iso {
			limit = m.share(limit)
		}
		// A request estimated at 0 tokens still needs one token of room.
		if used := b.tokSum + pTok; used+max(est, 1) > limit {
			return &Refusal{Bucket: c.Bucket, Reason: ReasonTPM, Limit: lim.TPM,
				RetryAfter: retryAfter(&b.tok, b.head, t, used+max(est, 1)-limit, used)}
		}
	}
	if lim.MaxParallel > 0 {
		allow := m.share(lim.MaxParallel)
		if !iso {
			// Never above what the live peers leave over: matters only
			// while shares move (a join), when peers may still hold more
			// than their new share.
			allow = min(allow, lim.MaxParallel-pIn)
		}
		if b.inflight+1 > allow {
			return &Refusal{Bucket: c.Bucket, Reason: ReasonParallel, Limit: lim.MaxParallel, RetryAfter: parallelRetry}
		}
	}
	return nil
}

// Done ends the request: in flight -1, and the token count corrected from
// the estimate to actualTokens. The correction lands in the slot of the
// admission second while that is still in the window; after that, only a
// positive correction is counted, in the current second.
func (t *Ticket) Done(actualTokens int64) {
	if t == nil || t.l == nil || t.done.Swap(true) {
		return
	}
	l := t.l
	d := clampValue(actualTokens) - t.est
	var sec int64
	if d != 0 {
		sec = l.clock() / slotNanos
	}
	l.lock(t.mask)
	for _, b := range t.buckets {
		b.inflight--
		if d == 0 {
			continue
		}
		b.advance(sec)
		if b.inWindow(t.sec) {
			i := t.sec % windowSlots
			v := max(b.tok[i]+d, 0)
			b.tokSum += v - b.tok[i]
			b.tok[i] = v
		} else if d > 0 {
			b.tok[b.head%windowSlots] += d
			b.tokSum += d
		}
	}
	l.unlock(t.mask)
}

// Status returns c's numbers for the response headers, from this node's
// view (its own usage plus live peers' reports; its own usage against its
// share while it hears from no peer). It does not count anything.
func (l *Limiter) Status(c Check) Status {
	t := l.clock()
	sec := t / slotNanos
	m := l.mem.Load()
	iso := l.isolated(m, t)
	st := Status{LimitRequests: max(c.Limits.RPM, 0), LimitTokens: max(c.Limits.TPM, 0)}
	if st.LimitRequests == 0 && st.LimitTokens == 0 {
		return st
	}
	s := l.shardOf(c.Bucket)
	sh := &l.shards[s]
	var ownReq, ownTok, pReq, pTok int64
	var lastReq, lastTok int64 = -1, -1 // newest own non-empty second
	sh.mu.Lock()
	if b := sh.buckets[c.Bucket]; b != nil {
		b.advance(sec)
		ownReq, ownTok = b.reqSum, b.tokSum
		if !iso {
			pReq, pTok, _ = b.peerSums(t, l.stale)
		}
		for s := b.head; s >= 0 && s > b.head-windowSlots; s-- {
			i := s % windowSlots
			if lastReq < 0 && b.req[i] > 0 {
				lastReq = s
			}
			if lastTok < 0 && b.tok[i] > 0 {
				lastTok = s
			}
			if lastReq >= 0 && lastTok >= 0 {
				break
			}
		}
	}
	sh.mu.Unlock()
	reset := func(used, last int64) time.Duration {
		switch {
		case used <= 0:
			return 0
		case last < 0: // only peers' usage, whose age is unknown
			return time.Duration(windowNanos)
		default:
			return time.Duration((last+windowSlots)*slotNanos - t)
		}
	}
	if lim := st.LimitRequests; lim > 0 {
		if iso {
			lim = m.share(lim)
		}
		used := ownReq + pReq
		st.RemainingRequests = max(lim-used, 0)
		st.ResetRequests = reset(used, lastReq)
	}
	if lim := st.LimitTokens; lim > 0 {
		if iso {
			lim = m.share(lim)
		}
		used := ownTok + pTok
		st.RemainingTokens = max(lim-used, 0)
		st.ResetTokens = reset(used, lastTok)
	}
	return st
}
