package ratelimit

import (
	"hash/maphash"
	"slices"

	"github.com/hashicorp/memberlist"
)

// Message is one gossip message returned by Delta. It implements
// memberlist.NamedBroadcast, so the node can queue it as is in a
// memberlist.TransmitLimitedQueue: a newer message with the same Key
// supersedes the older one still in the queue.
type Message struct {
	// Key names what the message updates: KeyPrefix+bucket for a bucket's
	// usage, HeartbeatKey for a heartbeat (a message without entries that
	// keeps an idle node from looking cut off).
	Key string
	// Data is the encoded message, for Merge on the other nodes.
	Data []byte
}

// Message keys.
const (
	KeyPrefix    = "ratelimit/"
	HeartbeatKey = "ratelimit"
)

var _ memberlist.NamedBroadcast = Message{}

// Name implements memberlist.NamedBroadcast.
func (m Message) Name() string { return m.Key }

// Message implements memberlist.Broadcast.
func (m Message) Message() []byte { return m.Data }

// Invalidates implements memberlist.Broadcast: a message supersedes an
// older one with the same key.
func (m Message) Invalidates(b memberlist.Broadcast) bool {
	nb, ok := b.(memberlist.NamedBroadcast)
	return ok && nb.Name() == m.Key
}

// Finished implements memberlist.Broadcast.
func (m Message) Finished() {}

// SetMembers sets the live nodes (this node is added if missing). Peers
// not in the list stop counting at once; their reports are dropped.
//
// Shares (the fallback RPM/TPM share of a cut-off node and the
// MaxParallel share) are computed from the list too, with one exception:
// a shorter list is not trusted while this node has heard from no peer
// (old or new) within StaleAfter, because a node that is cut off sees
// everyone else die. It then keeps dividing by the last known cluster
// size until it hears from a peer again (or the list grows). A graceful
// leave, reported while the leaving node was still heard from, shrinks
// the shares at once.
func (l *Limiter) SetMembers(ids []string) {
	l.gossipMu.Lock()
	defer l.gossipMu.Unlock()

	ids = append([]string{l.id}, ids...)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	in := make(map[string]bool, len(ids))
	for _, id := range ids {
		in[id] = true
	}

	t := l.clock()
	old := l.mem.Load()
	connected, added, removed := false, false, false

	l.peersMu.Lock()
	for id, p := range l.peers {
		if (p.member.Load() || in[id]) && t-p.lastHeard.Load() <= l.stale {
			connected = true
		}
		if p.member.Load() && !in[id] {
			removed = true
		}
		p.member.Store(in[id])
	}
	heard := int64(never)
	for _, id := range ids {
		if id == l.id {
			continue
		}
		p := l.peers[id]
		if p == nil {
			p = &peer{id: id}
			p.lastHeard.Store(never)
			p.member.Store(true)
			l.peers[id] = p
		}
		if !slices.Contains(old.ids, id) {
			added = true
		}
		heard = max(heard, p.lastHeard.Load())
	}
	shareIDs := old.shareIDs
	if len(ids) >= len(old.shareIDs) || connected {
		shareIDs = ids
	}
	l.mem.Store(&membership{
		ids:      ids,
		shareIDs: shareIDs,
		n:        int64(len(shareIDs)),
		rank:     int64(slices.Index(shareIDs, l.id)),
	})
	l.lastHeard.Store(heard)
	l.peersMu.Unlock()

	if added {
		l.resync.Store(true)
	}
	if removed {
		for i := range l.shards {
			sh := &l.shards[i]
			sh.mu.Lock()
			for _, b := range sh.buckets {
				b.reports = slices.DeleteFunc(b.reports, func(r report) bool { return !r.p.member.Load() })
			}
			sh.mu.Unlock()
		}
	}
}

// nextStamp returns a strictly increasing microsecond stamp. Caller holds
// gossipMu.
func (l *Limiter) nextStamp() int64 {
	s := l.now().UnixMicro()
	if s <= l.lastStamp {
		s = l.lastStamp + 1
	}
	l.lastStamp = s
	return s
}

// Delta returns this node's usage of every bucket that changed since the
// last Delta, one bucket per Message (Key = KeyPrefix+bucket), each at most
// maxBytes long (0: no limit; a bucket whose message would be longer is
// left to FullState). "Changed" includes usage leaving the window; on top
// of that every bucket is re-sent at least every 2×StaleAfter (repairing
// lost packets), and all of them after a peer joined or came back. When
// there is nothing to send for StaleAfter/4, Delta returns a heartbeat
// (Key = HeartbeatKey) so that peers keep counting this node as live.
//
// Delta also drops what it no longer needs: reports of removed peers or
// older than a window, and buckets idle for 2×StaleAfter. Call it every
// ~100 ms.
func (l *Limiter) Delta(maxBytes int) []Message {
	l.gossipMu.Lock()
	defer l.gossipMu.Unlock()
	t := l.clock()
	sec := t / slotNanos
	stamp := l.nextStamp()
	resync := l.resync.Swap(false)

	es := l.scratch[:0]
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for id, b := range sh.buckets {
			b.advance(sec)
			b.reports = slices.DeleteFunc(b.reports, func(r report) bool {
				// Non-members' reports are kept while they still talk (they
				// count again as soon as SetMembers lists them).
				gone := !r.p.member.Load() && t-r.p.lastHeard.Load() > l.stale
				return gone || t-r.at > windowNanos || r.req|r.tok|r.inflt == 0
			})
			req, tok, in := clampValue(b.reqSum), clampValue(b.tokSum), clampValue(b.inflight)
			zero := req|tok|in == 0
			if !zero {
				b.zeroSince = -1
			} else if b.zeroSince < 0 {
				b.zeroSince = t
			}
			changed := req != b.sentReq || tok != b.sentTok || in != b.sentIn
			// Buckets never reported and still empty need no message.
			known := b.sentAt != 0 || !zero
			if known && (changed || resync || t-b.sentAt >= l.refresh) {
				es = append(es, entry{bucket: b.id, req: req, tok: tok, inflt: in})
				b.sentReq, b.sentTok, b.sentIn, b.sentAt = req, tok, in, max(t, 1)
			}
			if zero && len(b.reports) == 0 && t-b.zeroSince >= 2*l.refresh {
				delete(sh.buckets, id)
			}
		}
		sh.mu.Unlock()
	}

	var out []Message
	for i := range es {
		e := &es[i]
		if len(e.bucket) > MaxBucketLen {
			continue
		}
		data := encode(l.id, stamp, es[i:i+1])
		if maxBytes > 0 && len(data) > maxBytes {
			continue
		}
		out = append(out, Message{Key: KeyPrefix + e.bucket, Data: data})
	}
	clear(es)
	l.scratch = es[:0]

	if len(out) == 0 && t-l.lastEmit >= l.beat {
		out = append(out, Message{Key: HeartbeatKey, Data: encode(l.id, stamp, nil)})
	}
	if len(out) > 0 {
		l.lastEmit = t
	}
	l.gcPeers(t)
	return out
}

// gcPeers forgets peers that are no longer members and were not heard
// from for a window. Caller holds gossipMu.
func (l *Limiter) gcPeers(t int64) {
	l.peersMu.Lock()
	for id, p := range l.peers {
		if !p.member.Load() && t-p.lastHeard.Load() > windowNanos {
			delete(l.peers, id)
		}
	}
	l.peersMu.Unlock()
}

// FullState returns this node's usage of every bucket it has usage in, in
// one message (memberlist LocalState for push-pull).
func (l *Limiter) FullState() []byte {
	l.gossipMu.Lock()
	defer l.gossipMu.Unlock()
	t := l.clock()
	sec := t / slotNanos
	stamp := l.nextStamp()
	var es []entry
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for _, b := range sh.buckets {
			b.advance(sec)
			req, tok, in := clampValue(b.reqSum), clampValue(b.tokSum), clampValue(b.inflight)
			if req|tok|in != 0 && len(b.id) <= MaxBucketLen {
				es = append(es, entry{bucket: b.id, req: req, tok: tok, inflt: in})
			}
		}
		sh.mu.Unlock()
	}
	return encode(l.id, stamp, es)
}

// MergeFull applies another node's FullState (memberlist MergeRemoteState).
func (l *Limiter) MergeFull(buf []byte) error { return l.Merge(buf) }

// Merge applies a message from another node (a Delta message or a
// FullState). For each bucket it carries, it replaces the sender's
// previous report if its stamp is newer. Messages from this node itself
// are ignored; malformed ones are rejected whole, before anything is
// applied.
func (l *Limiter) Merge(msg []byte) error {
	h, err := parse(msg)
	if err != nil {
		return err
	}
	if string(h.node) == l.id {
		return nil
	}
	t := l.clock()
	p := l.heard(h.node, t)
	sec := t / slotNanos
	h.eachEntry(func(name []byte, req, tok, inflt int64) {
		sh := &l.shards[maphash.Bytes(l.seed, name)&(numShards-1)]
		sh.mu.Lock()
		defer sh.mu.Unlock()
		b := sh.buckets[string(name)]
		zero := req|tok|inflt == 0
		if b == nil {
			if zero {
				return
			}
			b = newBucket(string(name), sec)
			sh.buckets[b.id] = b
		}
		for i := range b.reports {
			r := &b.reports[i]
			if r.p == p {
				if h.stamp > r.stamp {
					r.stamp, r.at, r.req, r.tok, r.inflt = h.stamp, t, req, tok, inflt
				}
				return
			}
		}
		if !zero {
			b.reports = append(b.reports, report{p: p, stamp: h.stamp, at: t, req: req, tok: tok, inflt: inflt})
		}
	})
	return nil
}

// heard records that node spoke at clock t and returns its peer. A member
// that had gone quiet (or was never heard) triggers a resync.
func (l *Limiter) heard(node []byte, t int64) *peer {
	l.peersMu.RLock()
	p := l.peers[string(node)]
	if p == nil {
		l.peersMu.RUnlock()
		l.peersMu.Lock()
		if p = l.peers[string(node)]; p == nil {
			p = &peer{id: string(node)}
			p.lastHeard.Store(never)
			l.peers[p.id] = p
		}
		l.peersMu.Unlock()
		l.peersMu.RLock()
	}
	if prev := p.lastHeard.Swap(t); p.member.Load() {
		if t-prev > l.stale {
			l.resync.Store(true)
		}
		for {
			cur := l.lastHeard.Load()
			if cur >= t || l.lastHeard.CompareAndSwap(cur, t) {
				break
			}
		}
	}
	l.peersMu.RUnlock()
	return p
}
