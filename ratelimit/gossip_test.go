package ratelimit

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func pair(t *testing.T) (*fakeClock, *Limiter, *Limiter) {
	t.Helper()
	clk := newClock()
	a := New(Config{NodeID: "a", Now: clk.Now})
	b := New(Config{NodeID: "b", Now: clk.Now})
	a.SetMembers([]string{"a", "b"})
	b.SetMembers([]string{"a", "b"})
	deliver(t, a, b) // heartbeats: each hears the other
	deliver(t, b, a)
	return clk, a, b
}

func deliver(t *testing.T, from, to *Limiter) []Message {
	t.Helper()
	msgs := from.Delta(1400)
	for _, m := range msgs {
		if err := to.Merge(m.Data); err != nil {
			t.Fatalf("merge %q: %v", m.Key, err)
		}
	}
	return msgs
}

func keys(msgs []Message) []string {
	var ks []string
	for _, m := range msgs {
		ks = append(ks, m.Key)
	}
	return ks
}

func TestDeltaMessages(t *testing.T) {
	clk, a, b := pair(t)
	c1 := Check{Bucket: "key:1", Limits: Limits{RPM: 100}}
	c2 := Check{Bucket: "team:1", Limits: Limits{RPM: 100}}
	mustAdmit(t, a, []Check{c1, c2}, 0).Done(0)

	msgs := deliver(t, a, b)
	got := strings.Join(keys(msgs), ",")
	if got != "ratelimit/key:1,ratelimit/team:1" && got != "ratelimit/team:1,ratelimit/key:1" {
		t.Fatalf("keys %q", got)
	}
	if st := b.Status(c1); st.RemainingRequests != 99 {
		t.Fatalf("b sees %+v", st)
	}
	// Nothing changed: nothing to send, not even a heartbeat yet.
	clk.Add(100 * time.Millisecond)
	if msgs := a.Delta(1400); len(msgs) != 0 {
		t.Fatalf("unchanged delta %q", keys(msgs))
	}
	// Idle for StaleAfter/4: a heartbeat.
	clk.Add(400 * time.Millisecond)
	msgs = deliver(t, a, b)
	if len(msgs) != 1 || msgs[0].Key != HeartbeatKey {
		t.Fatalf("heartbeat %q", keys(msgs))
	}
	// One bucket changes: one message.
	mustAdmit(t, a, []Check{c1}, 0).Done(0)
	if msgs := deliver(t, a, b); strings.Join(keys(msgs), ",") != "ratelimit/key:1" {
		t.Fatalf("keys %q", keys(msgs))
	}
	if st := b.Status(c1); st.RemainingRequests != 98 {
		t.Fatalf("b sees %+v", st)
	}
	// Refresh: unchanged buckets are re-sent every 2×StaleAfter.
	clk.Add(4 * time.Second)
	if msgs := a.Delta(1400); len(msgs) != 2 {
		t.Fatalf("refresh %q", keys(msgs))
	}
	// Usage leaving the window is a change too; once it is all gone, the
	// zero goes out and b forgets a's report.
	clk.Add(time.Minute)
	msgs = deliver(t, a, b)
	if len(msgs) != 2 {
		t.Fatalf("expiry %q", keys(msgs))
	}
	if st := b.Status(c1); st.RemainingRequests != 100 {
		t.Fatalf("b sees %+v", st)
	}
	// Idle buckets are collected.
	for range 100 {
		clk.Add(100 * time.Millisecond)
		deliver(t, a, b)
		deliver(t, b, a)
	}
	if n := bucketCount(a) + bucketCount(b); n != 0 {
		t.Fatalf("%d idle buckets left", n)
	}
}

func bucketCount(l *Limiter) int {
	n := 0
	for i := range l.shards {
		l.shards[i].mu.Lock()
		n += len(l.shards[i].buckets)
		l.shards[i].mu.Unlock()
	}
	return n
}

func TestDeltaMaxBytes(t *testing.T) {
	_, a, _ := pair(t)
	long := strings.Repeat("x", 200)
	mustAdmit(t, a, one("short", Limits{RPM: 1}), 0).Done(0)
	mustAdmit(t, a, one(long, Limits{RPM: 1}), 0).Done(0)
	msgs := a.Delta(100)
	if len(msgs) != 1 || msgs[0].Key != KeyPrefix+"short" || len(msgs[0].Data) > 100 {
		t.Fatalf("delta(100) %q", keys(msgs))
	}
	// The long one still travels in the full state.
	_, _, b := pair(t)
	if err := b.MergeFull(a.FullState()); err != nil {
		t.Fatal(err)
	}
	if st := b.Status(Check{Bucket: long, Limits: Limits{RPM: 10}}); st.RemainingRequests != 9 {
		t.Fatalf("long bucket not in full state: %+v", st)
	}
}

func TestMessageIsNamedBroadcast(t *testing.T) {
	_, a, _ := pair(t)
	mustAdmit(t, a, one("key:1", Limits{RPM: 10}), 0).Done(0)
	m1 := a.Delta(1400)[0]
	mustAdmit(t, a, one("key:1", Limits{RPM: 10}), 0).Done(0)
	m2 := a.Delta(1400)[0]
	q := &memberlist.TransmitLimitedQueue{NumNodes: func() int { return 3 }, RetransmitMult: 4}
	q.QueueBroadcast(m1)
	q.QueueBroadcast(m2)
	if q.NumQueued() != 1 {
		t.Fatalf("queued %d, want the newer message only", q.NumQueued())
	}
	got := q.GetBroadcasts(2, 1400)
	if len(got) != 1 || !bytes.Equal(got[0], m2.Data) {
		t.Fatal("the queue did not keep the newer message")
	}
	if !m2.Invalidates(m1) || m2.Invalidates(Message{Key: HeartbeatKey}) {
		t.Fatal("Invalidates")
	}
}

func TestOlderReportIgnored(t *testing.T) {
	_, a, b := pair(t)
	c := Check{Bucket: "key:1", Limits: Limits{RPM: 100}}
	mustAdmit(t, a, []Check{c}, 0).Done(0)
	old := a.Delta(1400)[0]
	mustAdmit(t, a, []Check{c}, 0).Done(0)
	full := a.FullState()
	if err := b.MergeFull(full); err != nil {
		t.Fatal(err)
	}
	if err := b.Merge(old.Data); err != nil { // late, older: ignored
		t.Fatal(err)
	}
	if st := b.Status(c); st.RemainingRequests != 98 {
		t.Fatalf("older report replaced a newer one: %+v", st)
	}
	// A node's own messages are ignored.
	if err := a.Merge(full); err != nil {
		t.Fatal(err)
	}
	if st := a.Status(c); st.RemainingRequests != 98 {
		t.Fatalf("own message counted: %+v", st)
	}
}

func TestFullStateRoundTrip(t *testing.T) {
	clk, a, b := pair(t)
	want := map[string]Limits{}
	for i, name := range []string{"key:1", "key:2", "team:x", "dep:gpt/azure-east", ""} {
		lim := Limits{RPM: 1000, TPM: 1 << 40, MaxParallel: 100}
		want[name] = lim
		for j := 0; j <= i; j++ {
			tk := mustAdmit(t, a, one(name, lim), 1000)
			if j%2 == 0 {
				tk.Done(250)
			}
		}
		clk.Add(time.Second)
		deliver(t, b, a) // b's heartbeat keeps a connected
	}
	full := a.FullState()
	h, err := parse(full)
	if err != nil {
		t.Fatal(err)
	}
	if string(h.node) != "a" || h.count != 5 {
		t.Fatalf("header node %q count %d", h.node, h.count)
	}
	if err := b.MergeFull(full); err != nil {
		t.Fatal(err)
	}
	for name, lim := range want {
		sa, sb := a.Status(Check{Bucket: name, Limits: lim}), b.Status(Check{Bucket: name, Limits: lim})
		if sa.RemainingRequests != sb.RemainingRequests || sa.RemainingTokens != sb.RemainingTokens {
			t.Fatalf("%q: a %+v, b %+v", name, sa, sb)
		}
	}
	// In flight travels too: a holds 1 of "team:x".
	var n int
	for {
		tk, r := b.Admit(one("team:x", Limits{MaxParallel: 52}), 0)
		if r != nil {
			break
		}
		defer tk.Done(0)
		n++
	}
	if n != 26 { // b's share of 52 is 26, and 52-1 are left
		t.Fatalf("b admitted %d in parallel, want 26", n)
	}
	// An empty node's state is valid and empty.
	_, c, d := pair(t)
	if err := d.MergeFull(c.FullState()); err != nil {
		t.Fatal(err)
	}
}

func TestParallelCapFromPeers(t *testing.T) {
	clk, _, b := pair(t)
	c := one("key:1", Limits{MaxParallel: 4})
	// a holds 3 from when it was alone; then b joins.
	a := New(Config{NodeID: "a", Now: clk.Now})
	var held []*Ticket
	for range 3 {
		held = append(held, mustAdmit(t, a, c, 0))
	}
	a.SetMembers([]string{"a", "b"})
	deliver(t, a, b)
	mustAdmit(t, b, c, 0) // share 2, but only 1 left cluster-wide
	mustRefuse(t, b, c, 0, ReasonParallel)
	for _, tk := range held {
		tk.Done(0)
	}
}

func TestMergeRejectsGarbage(t *testing.T) {
	_, a, _ := pair(t)
	mustAdmit(t, a, one("key:1", Limits{RPM: 1}), 0).Done(0)
	good := a.Delta(1400)[0].Data
	l := New(Config{NodeID: "z"})
	if err := l.Merge(good); err != nil {
		t.Fatalf("good message: %v", err)
	}
	big := binary.AppendUvarint(nil, maxValue+1)
	bad := map[string][]byte{
		"empty":          nil,
		"version":        append([]byte{2}, good[1:]...),
		"truncated":      good[:len(good)-1],
		"trailing":       append(append([]byte{}, good...), 0),
		"no node":        {wireVersion, 0, 0, 0},
		"node too long":  append([]byte{wireVersion}, binary.AppendUvarint(nil, MaxNodeIDLen+1)...),
		"huge count":     append(appendHeader(nil, "n", 1, 0)[:4], 0xff, 0xff, 0xff, 0xff, 0x0f),
		"count too high": append(appendHeader(nil, "n", 1, 2), 1, 'x', 1, 1, 1),
		"value too big":  append(append(appendHeader(nil, "n", 1, 1), 1, 'x'), append(big, 1, 1)...),
		"bad varint":     {wireVersion, 1, 'n', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	}
	for name, msg := range bad {
		if err := l.Merge(msg); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if err := l.MergeFull(msg); err == nil {
			t.Errorf("%s: accepted by MergeFull", name)
		}
	}
}

func FuzzMerge(f *testing.F) {
	clk := newClock()
	a := New(Config{NodeID: "a", Now: clk.Now})
	a.SetMembers([]string{"a", "b"})
	for _, name := range []string{"key:1", "team:2", ""} {
		mustAdmitF(a, name)
	}
	for _, m := range a.Delta(1400) {
		f.Add(m.Data)
	}
	f.Add(a.FullState())
	f.Add(encode("a", 0, nil))
	f.Add([]byte{})
	f.Add([]byte{wireVersion, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, msg []byte) {
		clk := newClock()
		l := New(Config{NodeID: "b", Now: clk.Now})
		l.SetMembers([]string{"a", "b"})
		err1 := l.Merge(msg)
		err2 := l.MergeFull(msg)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("Merge %v, MergeFull %v", err1, err2)
		}
		if err1 == nil {
			// An accepted message re-encodes to something accepted.
			h, err := parse(msg)
			if err != nil {
				t.Fatal(err)
			}
			var es []entry
			h.eachEntry(func(b []byte, req, tok, in int64) {
				es = append(es, entry{bucket: string(b), req: req, tok: tok, inflt: in})
			})
			if _, err := parse(encode(string(h.node), h.stamp, es)); err != nil {
				t.Fatalf("re-encoded: %v", err)
			}
		}
		// The limiter still works.
		c := one("key:1", Limits{RPM: 1 << 52, TPM: 1 << 52, MaxParallel: 1 << 52})
		if tk, r := l.Admit(c, 1); r == nil {
			tk.Done(1)
		}
		l.Status(c[0])
		clk.Add(time.Second)
		l.Delta(1400)
		l.FullState()
	})
}

func mustAdmitF(l *Limiter, name string) {
	tk, r := l.Admit(one(name, Limits{RPM: 10}), 5)
	if r != nil {
		panic(r)
	}
	tk.Done(7)
}
