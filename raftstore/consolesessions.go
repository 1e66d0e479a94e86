package raftstore

import (
	"fmt"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// Ended web console sessions (logouts). A console session is a signed
// cookie every node checks on its own; logging out records the session's
// fingerprint here until the session's own expiry (plus EndedSessionGrace),
// so that no node accepts a copy of the cookie afterwards. Entries are
// ordered by expiry, so each logout drops expired ones from the front of
// the tree (at most endedPruneStep, and adds one): the set never holds
// more than the most sessions that were live (within the grace) at once,
// each issued within one session lifetime and the grace. An expired entry
// still held matches no session that opens.
//
// The set is also bounded by size: MaxEndedConsoleSessions. The state
// machine does not enforce it (a new rule in Apply would fork replicas of
// different releases); the leader's admin API refuses a logout, and every
// console a login, while EndedConsoleSessionsFull says so, so that no entry
// ever has to be dropped early (which would let an ended session in again).

// ConsoleSessionIDLen is the length of a console session's fingerprint.
const ConsoleSessionIDLen = 16

// MaxConsoleSessionLife bounds how far beyond the command's time an ended
// session may expire, so that a bad entry cannot stay for ever.
const MaxConsoleSessionLife = 7 * 24 * time.Hour

// EndedSessionGrace is how long an ended session is kept past its expiry
// (by the leader's clock, which stamps the commands), so that a node whose
// clock runs behind the leader's, and so still takes the session for
// live, refuses it too.
const EndedSessionGrace = 5 * time.Minute

// MaxEndedConsoleSessions is how many ended sessions the cluster keeps at
// most: 27 bytes each in a snapshot and about 30 in memory, so 2.7 MB of
// snapshot when full. Each logout of a live session adds one until
// the session expires (8 hours), and one user gets at most 10 logins a
// minute from each node: this many needs a flood.
const MaxEndedConsoleSessions = 100_000

// endedPruneStep bounds the expired sessions one logout forgets, so that
// its cost does not grow with how many expired at once (as auditPruneStep
// does for the audit log); each logout adds at most one, so the expired
// ones still held only shrink.
const endedPruneStep = 32

// endedSession is an ended session: its expiry (Unix seconds) and
// fingerprint.
type endedSession struct {
	expires int64
	id      [ConsoleSessionIDLen]byte
}

func endedSessionLess(a, b endedSession) bool {
	if a.expires != b.expires {
		return a.expires < b.expires
	}
	return string(a.id[:]) < string(b.id[:])
}

// newEndedSession is the item of a session; ids of another length are
// refused before.
func newEndedSession(id []byte, expires int64) endedSession {
	e := endedSession{expires: expires}
	copy(e.id[:], id)
	return e
}

func newEndedSessions() ptree[endedSession] { return newPtree(endedSessionLess) }

// ConsoleSessionEnded reports whether the console session with this
// fingerprint and expiry was logged out. It reads the published state
// only: no lock, no allocation.
func (s *State) ConsoleSessionEnded(id []byte, expiresAt int64) bool {
	if s.endedSessions.Len() == 0 || len(id) != ConsoleSessionIDLen {
		return false
	}
	_, ok := s.endedSessions.get(newEndedSession(id, expiresAt))
	return ok
}

// EndedConsoleSessions returns the number of ended sessions held.
func (s *State) EndedConsoleSessions() int { return s.endedSessions.Len() }

// EndedConsoleSessionsFull reports whether a logout at time now would take
// the set of ended sessions past limit entries: it holds limit or more,
// and the state machine would not forget expired ones to make room (a
// logout forgets the oldest ones expired EndedSessionGrace before its
// time, at most endedPruneStep, before it adds its own). A logout it
// allows leaves the set at limit entries at most, or smaller than before.
// It looks at endedPruneStep entries at most.
func (s *State) EndedConsoleSessionsFull(limit int, now time.Time) bool {
	n := s.endedSessions.Len()
	if n < limit {
		return false
	}
	need := min(n-limit+1, endedPruneStep) // expired ones the logout must forget
	over, expired := now.Add(-EndedSessionGrace).Unix(), 0
	s.endedSessions.ascend(func(e endedSession) bool {
		if e.expires > over {
			return false
		}
		expired++
		return expired < need
	})
	return expired < need
}

func validEndedSession(e *pb.EndedConsoleSession) error {
	if len(e.GetSessionId()) != ConsoleSessionIDLen {
		return fmt.Errorf("console session id has %d bytes, want %d: %w", len(e.GetSessionId()), ConsoleSessionIDLen, ErrInvalid)
	}
	if e.GetExpiresAt() <= 0 {
		return fmt.Errorf("console session expiry %d: %w", e.GetExpiresAt(), ErrInvalid)
	}
	return nil
}

// endConsoleSession records c's session as ended until its expiry, and
// drops up to endedPruneStep ended sessions that expired EndedSessionGrace
// before the command's time.
func endConsoleSession(cur *State, c *pb.EndConsoleSessionCommand, unixNanos int64) (*State, error) {
	e := c.GetSession()
	if err := validEndedSession(e); err != nil {
		return nil, err
	}
	now := timeOf(unixNanos)
	if e.GetExpiresAt() > now.Add(MaxConsoleSessionLife).Unix() {
		return nil, fmt.Errorf("console session expires more than %v after the logout: %w", MaxConsoleSessionLife, ErrInvalid)
	}
	over := now.Add(-EndedSessionGrace).Unix() // expired by then on every node
	x := cur.endedSessions.txn()
	for range endedPruneStep {
		first, ok := x.min()
		if !ok || first.expires > over {
			break
		}
		x.delete(first)
	}
	if e.GetExpiresAt() > over {
		x.put(newEndedSession(e.GetSessionId(), e.GetExpiresAt()))
	}
	next := *cur
	next.endedSessions = x.commit()
	return &next, nil
}

// proto is e as a snapshot holds it.
func (e endedSession) proto() *pb.EndedConsoleSession {
	return &pb.EndedConsoleSession{SessionId: append([]byte(nil), e.id[:]...), ExpiresAt: e.expires}
}

// addEndedSessions loads a snapshot's ended sessions into b's state.
func (b *stateBuilder) addEndedSessions(list []*pb.EndedConsoleSession) error {
	if len(list) == 0 {
		return nil
	}
	x := b.st.endedSessions.txn()
	for _, e := range list {
		if err := validEndedSession(e); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		x.put(newEndedSession(e.GetSessionId(), e.GetExpiresAt()))
	}
	b.st.endedSessions = x.commit()
	return nil
}

// mergeEndedSessions keeps, in a restored state, every session the
// running cluster has ended: a restore of an older backup must not let a
// logged-out session in again.
func mergeEndedSessions(restored, cur *State) {
	if cur.endedSessions.Len() == 0 {
		return
	}
	x := restored.endedSessions.txn()
	cur.endedSessions.ascend(func(e endedSession) bool {
		x.put(e)
		return true
	})
	restored.endedSessions = x.commit()
}
