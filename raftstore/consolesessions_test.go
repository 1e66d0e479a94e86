package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

const sec = int64(1e9)

func sessionID(n byte) []byte { return bytes.Repeat([]byte{n}, ConsoleSessionIDLen) }

// endSessionCmd ends session n, expiring at expires (Unix seconds), at
// command time nowSec (Unix seconds).
func endSessionCmd(n byte, expires, nowSec int64) *pb.Command {
	return at(&pb.Command{Op: &pb.Command_EndConsoleSession{EndConsoleSession: &pb.EndConsoleSessionCommand{
		Session: &pb.EndedConsoleSession{SessionId: sessionID(n), ExpiresAt: expires}}}}, nowSec*sec)
}

func TestEndedConsoleSessionIsRefusedUntilItsExpiry(t *testing.T) {
	h := newHarness(t)
	now := baseNanos / sec
	h.must(endSessionCmd(1, now+3600, now))
	st := h.state()
	if !st.ConsoleSessionEnded(sessionID(1), now+3600) {
		t.Fatal("the logged-out session is not recorded as ended")
	}
	if st.ConsoleSessionEnded(sessionID(2), now+3600) || st.ConsoleSessionEnded(sessionID(1), now+3601) {
		t.Fatal("another session (other id, or other expiry) counts as ended")
	}
}

// The set holds only sessions that were still live at the last logout
// (give or take the grace for nodes' clocks): each logout drops the ones
// expired by its time, and a session that has expired already is not
// stored at all.
func TestEndedConsoleSessionsArePrunedOnceExpired(t *testing.T) {
	h := newHarness(t)
	now := baseNanos / sec
	grace := int64(EndedSessionGrace.Seconds())
	for i := range 10 {
		h.must(endSessionCmd(byte(i), now+100+int64(i), now))
	}
	if n := h.state().EndedConsoleSessions(); n != 10 {
		t.Fatalf("%d ended sessions, want 10", n)
	}
	before := h.state()
	h.must(endSessionCmd(20, now+1000, now+104+grace)) // expires 100..104 are over, 105 is within the grace
	if n := h.state().EndedConsoleSessions(); n != 6 {
		t.Fatalf("%d ended sessions after the first five expired, want 6 (five and the new one)", n)
	}
	if h.state().ConsoleSessionEnded(sessionID(4), now+104) || !h.state().ConsoleSessionEnded(sessionID(5), now+105) {
		t.Fatal("pruned the wrong sessions")
	}
	if before.EndedConsoleSessions() != 10 || !before.ConsoleSessionEnded(sessionID(0), now+100) {
		t.Fatal("pruning changed the published state before it")
	}
	h.must(endSessionCmd(21, now+2000, now+2000+grace)) // over already: dropped, and prunes the rest
	if n := h.state().EndedConsoleSessions(); n != 0 {
		t.Fatalf("%d ended sessions after all expired, want 0", n)
	}
}

func TestEndConsoleSessionRefusesBadEntries(t *testing.T) {
	now := baseNanos / sec
	for name, cmd := range map[string]*pb.Command{
		"short id":   at(&pb.Command{Op: &pb.Command_EndConsoleSession{EndConsoleSession: &pb.EndConsoleSessionCommand{Session: &pb.EndedConsoleSession{SessionId: []byte{1}, ExpiresAt: now + 1}}}}, now*sec),
		"no session": at(&pb.Command{Op: &pb.Command_EndConsoleSession{EndConsoleSession: &pb.EndConsoleSessionCommand{}}}, now*sec),
		"far expiry": endSessionCmd(1, now+int64(MaxConsoleSessionLife.Seconds())+1, now),
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			if _, err := h.apply(cmd); !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			if h.state().EndedConsoleSessions() != 0 {
				t.Fatal("a refused entry was stored")
			}
		})
	}
}

func TestEndedConsoleSessionsSurviveSnapshotRestore(t *testing.T) {
	h := newFixture(t)
	now := baseNanos / sec
	h.must(endSessionCmd(1, now+3600, now), endSessionCmd(2, now+7200, now))
	want := h.state()
	f := newFSM()
	if err := f.Restore(io.NopCloser(bytes.NewReader(persist(t, h.f)))); err != nil {
		t.Fatal(err)
	}
	got := f.state.Load()
	compareStates(t, got, want)
	if got.EndedConsoleSessions() != 2 || !got.ConsoleSessionEnded(sessionID(1), now+3600) || !got.ConsoleSessionEnded(sessionID(2), now+7200) {
		t.Fatal("ended sessions lost in the snapshot")
	}
}

// An admin restore of a backup taken before a logout keeps the session
// ended, and the backup's own ended sessions too.
func TestRestoreCommandKeepsTheRunningClustersEndedSessions(t *testing.T) {
	h := newFixture(t)
	now := baseNanos / sec
	h.must(endSessionCmd(1, now+3600, now))
	backup := snapshotOf(h.state())
	h.must(endSessionCmd(2, now+3600, now+1))
	h.must(&pb.Command{Op: &pb.Command_Restore{Restore: &pb.RestoreCommand{Snapshot: backup}}})
	st := h.state()
	if !st.ConsoleSessionEnded(sessionID(1), now+3600) || !st.ConsoleSessionEnded(sessionID(2), now+3600) {
		t.Fatal("a restore let a logged-out session in again")
	}
}

// stateWithEnded is a state holding n live ended sessions.
func stateWithEnded(n int, now int64) *State {
	st := emptyState()
	x := st.endedSessions.txn()
	for i := range n {
		e := endedSession{expires: now + 3600 + int64(i%3600)}
		e.id[0], e.id[1], e.id[2] = byte(i), byte(i>>8), byte(i>>16)
		x.put(e)
	}
	st.endedSessions = x.commit()
	return st
}

// A logout costs the same whatever the number of sessions ended before
// (a path copy in the B-tree), and so does the check every console call
// makes.
func BenchmarkEndConsoleSession(b *testing.B) {
	now := baseNanos / sec
	for _, n := range []int{10, 100_000} {
		st := stateWithEnded(n, now)
		b.Run(fmt.Sprintf("apply/ended=%d", n), func(b *testing.B) {
			c := &pb.EndConsoleSessionCommand{Session: &pb.EndedConsoleSession{SessionId: sessionID(0xee), ExpiresAt: now + 100}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := endConsoleSession(st, c, now*sec); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("check/ended=%d", n), func(b *testing.B) {
			id := sessionID(0xee)
			b.ReportAllocs()
			for b.Loop() {
				if st.ConsoleSessionEnded(id, now+100) {
					b.Fatal("ended")
				}
			}
		})
	}
}

// Ended sessions travel in snapshot parts of at most snapshotChunk items,
// like every other large part of the state, so that no record grows with
// the number of logouts; they restore whole.
func TestSnapshotPartsHoldAtMostAChunkOfEndedSessions(t *testing.T) {
	n := 2*snapshotChunk + 5
	st := stateWithEnded(n, baseNanos/sec)
	total := 0
	if err := snapshotParts(st, func(p *pb.Snapshot) error {
		if k := len(p.GetEndedConsoleSessions()); k > snapshotChunk {
			t.Errorf("a snapshot part holds %d ended sessions, more than %d", k, snapshotChunk)
		}
		total += len(p.GetEndedConsoleSessions())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if total != n {
		t.Fatalf("the parts hold %d ended sessions, want %d", total, n)
	}
	f := newFSM()
	f.state.Store(st)
	if got := restored(t, persist(t, f)); got.EndedConsoleSessions() != n {
		t.Fatalf("%d ended sessions restored, want %d", got.EndedConsoleSessions(), n)
	}
}

// A logout forgets at most endedPruneStep expired sessions, however many
// expired together (a burst of logins ends at once), so that no single
// entry stalls the state machine of every node; the next logouts go on.
func TestEndConsoleSessionPrunesABoundedNumberPerLogout(t *testing.T) {
	now := baseNanos / sec
	n := 4 * endedPruneStep
	st := stateWithEnded(n, now) // expiries now+3600 ...
	later := now + 2*3600 + int64(EndedSessionGrace.Seconds())
	c := &pb.EndConsoleSessionCommand{Session: &pb.EndedConsoleSession{SessionId: sessionID(0xee), ExpiresAt: later + 3600}}
	next, err := endConsoleSession(st, c, later*sec)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := next.EndedConsoleSessions(), n-endedPruneStep+1; got != want {
		t.Fatalf("%d ended sessions after a logout, want %d (%d expired forgotten, the new one added)", got, want, endedPruneStep)
	}
	for range 3 {
		if next, err = endConsoleSession(next, c, later*sec); err != nil {
			t.Fatal(err)
		}
	}
	if got := next.EndedConsoleSessions(); got != 1 {
		t.Fatalf("%d ended sessions after four logouts, want 1 (every expired one forgotten)", got)
	}
}

// The set is full when it holds the limit and a logout would not forget
// an expired session to make room: a logout then would take it past the
// limit. Expired sessions it still holds (the state machine forgets a few
// per logout) do not count, so a full set empties as sessions expire, even
// if no logout comes to prune it.
func TestEndedConsoleSessionsFullOnlyWhenALogoutWouldPassTheLimit(t *testing.T) {
	now := baseNanos / sec
	st := stateWithEnded(5, now) // expiries now+3600 ... now+3604
	at := func(unix int64) time.Time { return time.Unix(unix, 0) }
	grace := int64(EndedSessionGrace.Seconds())
	for _, c := range []struct {
		limit int
		now   int64
		full  bool
	}{
		{6, now, false},
		{5, now, true},
		{3, now, true},
		{5, now + 3600 + grace, false},    // the first expired: the logout forgets it
		{3, now + 3601 + grace, true},     // two expired, three to forget
		{3, now + 3602 + grace, false},    // three expired
		{1, now + 3604 + grace - 1, true}, // one still live
	} {
		if got := st.EndedConsoleSessionsFull(c.limit, at(c.now)); got != c.full {
			t.Errorf("limit %d at now%+d: full = %v, want %v", c.limit, c.now-now, got, c.full)
		}
	}
	// A logout the check allows leaves the set at the limit.
	later := now + 3602 + grace
	c := &pb.EndConsoleSessionCommand{Session: &pb.EndedConsoleSession{SessionId: sessionID(0xee), ExpiresAt: later + 3600}}
	next, err := endConsoleSession(st, c, later*sec)
	if err != nil {
		t.Fatal(err)
	}
	if n := next.EndedConsoleSessions(); n != 3 {
		t.Fatalf("%d ended sessions after a logout the limit 3 allowed, want 3", n)
	}
}

// At the bound the ended sessions take 27 bytes each in a snapshot: 2.7
// MB in all (what docs/console.md says).
func TestEndedSessionsAtTheBoundTake27BytesEachInASnapshot(t *testing.T) {
	st := stateWithEnded(MaxEndedConsoleSessions, baseNanos/sec)
	total := 0
	if err := snapshotParts(st, func(p *pb.Snapshot) error {
		total += proto.Size(&pb.Snapshot{EndedConsoleSessions: p.GetEndedConsoleSessions()})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if per := float64(total) / MaxEndedConsoleSessions; per > 27 {
		t.Fatalf("%.1f snapshot bytes per ended session at the bound (%d in all), want 27 at most", per, total)
	}
}
