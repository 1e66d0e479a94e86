package ratelimit

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
	"time"
)

// A node restarted within the minute goes on counting what it admitted:
// the saved seconds leave the new limiter's window when they would have
// left the old one's, and peers hear the restored usage.
func TestSaveRestore(t *testing.T) {
	clk := newClock()
	old := newSingle(clk)
	lim := Limits{RPM: 10, TPM: 1000}
	for range 4 {
		mustAdmit(t, old, one("key:a", lim), 100).Done(100)
	}
	clk.Add(20 * time.Second)
	for range 3 {
		mustAdmit(t, old, one("key:a", lim), 50).Done(50)
	}
	mustAdmit(t, old, one("team:t", lim), 7).Done(7)
	mustAdmit(t, old, one("key:gone", lim), 1).Done(1)
	clk.Add(500 * time.Millisecond)
	saved := old.Save()

	// The new process starts 2.7 s later, on a clock whose seconds are not
	// aligned with the old one's.
	clk.Add(2700 * time.Millisecond)
	fresh := New(Config{NodeID: "a", Now: clk.Now})
	n, err := fresh.Restore(saved)
	if err != nil || n != 3 {
		t.Fatalf("Restore = %d, %v; want 3 buckets", n, err)
	}
	st := fresh.Status(Check{Bucket: "key:a", Limits: lim})
	if st.RemainingRequests != 3 || st.RemainingTokens != 1000-550 {
		t.Fatalf("after restore: %+v; want 3 requests and 450 tokens left", st)
	}
	mustAdmit(t, fresh, one("key:a", lim), 10).Done(10)
	mustAdmit(t, fresh, one("key:a", lim), 10).Done(10)
	mustAdmit(t, fresh, one("key:a", lim), 10).Done(10)
	mustRefuse(t, fresh, one("key:a", lim), 10, ReasonRPM)

	// The first four were admitted 23.2 s before the restart began...: they
	// leave when their minute is up (rounded later, never earlier).
	clk.Add(60*time.Second - 23200*time.Millisecond - 100*time.Millisecond)
	mustRefuse(t, fresh, one("key:a", lim), 10, ReasonRPM)
	clk.Add(1100 * time.Millisecond)
	if st := fresh.Status(Check{Bucket: "key:a", Limits: lim}); st.RemainingRequests != 4 {
		t.Errorf("after the old seconds left: %+v; want 4 requests left", st)
	}

	// Peers hear the restored usage in the next Delta.
	var sent bool
	for _, m := range fresh.Delta(1400) {
		sent = sent || m.Key == KeyPrefix+"team:t"
	}
	if !sent {
		t.Error("restored usage of team:t not gossiped")
	}

	// Usage saved more than a minute ago is all gone.
	clk.Add(2 * time.Minute)
	late := New(Config{NodeID: "a", Now: clk.Now})
	if n, err := late.Restore(saved); err != nil || n != 0 {
		t.Errorf("Restore of an old save = %d, %v; want nothing", n, err)
	}
	if st := late.Status(Check{Bucket: "key:a", Limits: lim}); st.RemainingRequests != 10 {
		t.Errorf("old save counted: %+v", st)
	}
}

// Seconds stamped before the limiter's start, however far (a damaged
// file), are dropped without overflowing into "now".
func TestRestoreAncientStamps(t *testing.T) {
	clk := newClock()
	l := newSingle(clk)
	for _, stamp := range []int64{math.MinInt64 + 5, -1, 0, clk.Now().Add(-61 * time.Second).UnixMilli()} {
		saved := binary.AppendVarint([]byte{savedVersion, 0, 1, 1, 'k', 1}, stamp)
		saved = append(saved, 7, 0)
		if n, err := l.Restore(saved); err != nil || n != 0 {
			t.Errorf("stamp %d: Restore = %d, %v; want nothing restored", stamp, n, err)
		}
	}
	if st := l.Status(Check{Bucket: "k", Limits: Limits{RPM: 10}}); st.RemainingRequests != 10 {
		t.Errorf("ancient seconds counted: %+v", st)
	}
}

// A save stamped in the future (the clock was set back) counts as now:
// kept for a whole minute, never dropped early.
func TestRestoreFromTheFuture(t *testing.T) {
	clk := newClock()
	old := newSingle(clk)
	lim := Limits{RPM: 2}
	mustAdmit(t, old, one("k", lim), 0).Done(0)
	saved := old.Save()
	clk.Add(-time.Hour)
	fresh := New(Config{NodeID: "a", Now: clk.Now})
	if n, err := fresh.Restore(saved); err != nil || n != 1 {
		t.Fatalf("Restore = %d, %v", n, err)
	}
	clk.Add(59 * time.Second)
	if st := fresh.Status(Check{Bucket: "k", Limits: lim}); st.RemainingRequests != 1 {
		t.Errorf("59 s later: %+v; want the restored request still counted", st)
	}
	clk.Add(2 * time.Second)
	if st := fresh.Status(Check{Bucket: "k", Limits: lim}); st.RemainingRequests != 2 {
		t.Errorf("61 s later: %+v; want it gone", st)
	}
}

// Restore checks everything before it applies anything.
func TestRestoreRejectsMalformed(t *testing.T) {
	clk := newClock()
	old := newSingle(clk)
	for _, b := range []string{"key:a", "key:b"} {
		mustAdmit(t, old, one(b, Limits{RPM: 5}), 3).Done(3)
	}
	good := old.Save()
	fresh := New(Config{NodeID: "a", Now: clk.Now})
	for name, bad := range map[string][]byte{
		"empty":       nil,
		"version":     append([]byte{9}, good[1:]...),
		"truncated":   good[:len(good)-1],
		"trailing":    append(bytes.Clone(good), 0),
		"huge count":  {savedVersion, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"zero slots":  {savedVersion, 0, 1, 1, 'k', 0},
		"many slots":  {savedVersion, 0, 1, 1, 'k', 61},
		"empty id":    {savedVersion, 0, 1, 0, 1, 0, 1, 1},
		"big value":   {savedVersion, 0, 1, 1, 'k', 1, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 1},
		"last broken": append(bytes.Clone(good[:len(good)-1]), 0x80),
	} {
		if n, err := fresh.Restore(bad); err == nil || n != 0 {
			t.Errorf("%s: Restore = %d, %v; want an error", name, n, err)
		}
	}
	if st := fresh.Status(Check{Bucket: "key:a", Limits: Limits{RPM: 5}}); st.RemainingRequests != 5 {
		t.Errorf("a rejected input was applied in part: %+v", st)
	}
	if n, err := fresh.Restore(good); err != nil || n != 2 {
		t.Errorf("good input after bad ones: %d, %v", n, err)
	}
}

func FuzzRestore(f *testing.F) {
	clk := newClock()
	old := newSingle(clk)
	mustAdmitF := func(b string) {
		tk, _ := old.Admit(one(b, Limits{RPM: 5}), 3)
		tk.Done(3)
	}
	mustAdmitF("key:a")
	mustAdmitF("team:b")
	f.Add(old.Save())
	f.Add([]byte{savedVersion, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		l := New(Config{NodeID: "a", Now: clk.Now})
		n, err := l.Restore(b)
		if err != nil && n != 0 {
			t.Fatalf("error %v with %d buckets restored", err, n)
		}
		if err == nil {
			// What was restored saves and restores again to the same.
			again := New(Config{NodeID: "a", Now: clk.Now})
			if _, err := again.Restore(l.Save()); err != nil {
				t.Fatalf("re-restore: %v", err)
			}
			if a, b := ownSums(l), ownSums(again); a != b {
				t.Fatalf("restored %v, then %v after a save and a restore", a, b)
			}
		}
	})
}

// ownSums adds up the node's own requests and tokens over all buckets.
func ownSums(l *Limiter) [2]int64 {
	var s [2]int64
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for _, b := range sh.buckets {
			s[0] += b.reqSum
			s[1] += b.tokSum
		}
		sh.mu.Unlock()
	}
	return s
}
