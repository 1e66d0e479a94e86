package mcp

import (
	"context"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Client sessions (the session protocol) cost the node memory until they
// end: a client that opens sessions without ever closing them would grow
// it without bound. Each key may hold MaxSessionsPerKey at once; when it
// opens one more, its least recently used session is closed (its next
// request gets 404 "session not found", which MCP clients answer by
// initializing again). Refusing the new session instead would lock out a
// client that merely lost track of its old ones until they expired.
//
// Idle sessions are closed here, not by the SDK's timer: the fast path
// (fast_session.go) answers most requests of a session without the SDK
// seeing them. A session is idle when no request naming it has arrived
// for SessionTimeout and none is running.

// clientSession is one session of the stateful handler.
type clientSession struct {
	id, key string
	ss      *sdk.ServerSession
	last    time.Time // the last request that named it
	running int       // requests naming it that have not ended
	// calls are the fast path's calls in flight, by JSON-RPC id, so that
	// notifications/cancelled reaches them.
	calls map[string]context.CancelFunc
}

// sessionRegistry holds the live client sessions by id and by key.
type sessionRegistry struct {
	max int
	now func() time.Time

	mu    sync.Mutex
	byID  map[string]*clientSession
	byKey map[string]map[string]*clientSession
}

func newSessionRegistry(limit int, now func() time.Time) *sessionRegistry {
	return &sessionRegistry{max: limit, now: now, byID: map[string]*clientSession{}, byKey: map[string]map[string]*clientSession{}}
}

// add registers a new session of key and returns the session it evicts
// (nil when the key is within its cap); the caller closes it.
func (r *sessionRegistry) add(key string, ss *sdk.ServerSession) *sdk.ServerSession {
	cs := &clientSession{id: ss.ID(), key: key, ss: ss, last: r.now()}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byID[cs.id] = cs
	m := r.byKey[key]
	if m == nil {
		m = map[string]*clientSession{}
		r.byKey[key] = m
	}
	m[cs.id] = cs
	if len(m) <= r.max {
		return nil
	}
	var oldest *clientSession
	for _, o := range m {
		if o != cs && (oldest == nil || o.last.Before(oldest.last)) {
			oldest = o
		}
	}
	r.removeLocked(oldest.id)
	return oldest.ss
}

// begin marks the session named by a request of key as used now and
// running until the returned func is called; another key's requests
// (which the SDK refuses) leave it alone.
func (r *sessionRegistry) begin(id, key string) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := r.byID[id]
	if cs == nil || cs.key != key {
		return func() {}
	}
	cs.last = r.now()
	cs.running++
	return func() {
		r.mu.Lock()
		cs.running--
		cs.last = r.now()
		r.mu.Unlock()
	}
}

// owner returns the key that opened the session ("" if unknown).
func (r *sessionRegistry) owner(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cs := r.byID[id]; cs != nil {
		return cs.key
	}
	return ""
}

// addCall registers a fast-path call of session id; the returned func
// forgets it.
func (r *sessionRegistry) addCall(id, callID string, cancel context.CancelFunc) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := r.byID[id]
	if cs == nil {
		return func() {}
	}
	if cs.calls == nil {
		cs.calls = map[string]context.CancelFunc{}
	}
	cs.calls[callID] = cancel
	return func() {
		r.mu.Lock()
		delete(cs.calls, callID)
		r.mu.Unlock()
	}
}

// cancelCall cancels a fast-path call of session id and reports whether
// there was one.
func (r *sessionRegistry) cancelCall(id, callID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := r.byID[id]
	if cs == nil || cs.calls[callID] == nil {
		return false
	}
	cs.calls[callID]()
	return true
}

// expired forgets and returns the sessions idle for longer than timeout.
func (r *sessionRegistry) expired(timeout time.Duration) []*sdk.ServerSession {
	cutoff := r.now().Add(-timeout)
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*sdk.ServerSession
	for id, cs := range r.byID {
		if cs.running == 0 && cs.last.Before(cutoff) {
			r.removeLocked(id)
			out = append(out, cs.ss)
		}
	}
	return out
}

// closeIdle closes the sessions idle for longer than SessionTimeout.
func (g *Gateway) closeIdle() {
	for _, ss := range g.sessions.expired(g.cfg.SessionTimeout) {
		go func() { _ = ss.Close() }()
	}
}

// remove forgets a session that ended.
func (r *sessionRegistry) remove(id string) {
	r.mu.Lock()
	r.removeLocked(id)
	r.mu.Unlock()
}

func (r *sessionRegistry) removeLocked(id string) {
	cs := r.byID[id]
	if cs == nil {
		return
	}
	delete(r.byID, id)
	if m := r.byKey[cs.key]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(r.byKey, cs.key)
		}
	}
}

// count returns how many sessions key holds.
func (r *sessionRegistry) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byKey[key])
}

// sessionStarted registers the session an initialize request opened (for
// the key that opened it), closes the one it evicts, and forgets it when
// it ends.
func (g *Gateway) sessionStarted(req sdk.Request) {
	ss, ok := req.GetSession().(*sdk.ServerSession)
	if !ok || ss == nil || ss.ID() == "" {
		return // sessionless
	}
	key, err := keyOf(req)
	if err != nil {
		return
	}
	if old := g.sessions.add(key.ID, ss); old != nil {
		g.log.Info("mcp session closed: the key opened more than its maximum of sessions", "key", key.ID, "max", g.sessions.max)
		go func() { _ = old.Close() }()
	}
	go func() {
		_ = ss.Wait()
		g.sessions.remove(ss.ID())
	}()
}
