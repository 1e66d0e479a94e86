package ratelimit

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a simulated clock; tests move it by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newSingle(clk *fakeClock) *Limiter {
	return New(Config{NodeID: "a", Now: clk.Now})
}

func one(bucket string, lim Limits) []Check { return []Check{{Bucket: bucket, Limits: lim}} }

func mustAdmit(t *testing.T, l *Limiter, checks []Check, est int64) *Ticket {
	t.Helper()
	tk, r := l.Admit(checks, est)
	if r != nil {
		t.Fatalf("refused: %v", r)
	}
	return tk
}

func mustRefuse(t *testing.T, l *Limiter, checks []Check, est int64, reason string) *Refusal {
	t.Helper()
	tk, r := l.Admit(checks, est)
	if r == nil {
		tk.Done(est)
		t.Fatalf("admitted, want refusal %q", reason)
	}
	if tk != nil {
		t.Fatalf("refusal with a ticket")
	}
	if r.Reason != reason {
		t.Fatalf("refused for %q, want %q (%v)", r.Reason, reason, r)
	}
	return r
}

func TestSingleNodeRPM(t *testing.T) {
	clk := newClock()
	l := newSingle(clk)
	c := one("key:1", Limits{RPM: 5})
	for range 5 {
		mustAdmit(t, l, c, 0).Done(0)
	}
	r := mustRefuse(t, l, c, 0, ReasonRPM)
	if r.Bucket != "key:1" || r.Limit != 5 || r.RetryAfter != 60*time.Second {
		t.Fatalf("refusal %+v", r)
	}
	clk.Add(30 * time.Second)
	if r := mustRefuse(t, l, c, 0, ReasonRPM); r.RetryAfter != 30*time.Second {
		t.Fatalf("retry after %v, want 30s", r.RetryAfter)
	}
	clk.Add(29*time.Second + 900*time.Millisecond)
	if r := mustRefuse(t, l, c, 0, ReasonRPM); r.RetryAfter != time.Second {
		t.Fatalf("retry after %v, want 1s", r.RetryAfter)
	}
	clk.Add(100 * time.Millisecond) // t = 60s: the first second's slot expires
	for range 5 {
		mustAdmit(t, l, c, 0).Done(0)
	}
	mustRefuse(t, l, c, 0, ReasonRPM)
}

func TestSingleNodeTPM(t *testing.T) {
	clk := newClock()
	l := newSingle(clk)
	c := one("team:1", Limits{TPM: 1000})
	a := mustAdmit(t, l, c, 400)
	b := mustAdmit(t, l, c, 400)
	r := mustRefuse(t, l, c, 400, ReasonTPM)
	if r.Limit != 1000 || r.RetryAfter != 60*time.Second {
		t.Fatalf("refusal %+v", r)
	}
	c2 := mustAdmit(t, l, c, 200) // exactly 1000
	mustRefuse(t, l, c, 0, ReasonTPM)
	a.Done(400)
	b.Done(400)
	c2.Done(200)
	// A request larger than the whole limit can never pass.
	clk.Add(time.Minute)
	if r := mustRefuse(t, l, c, 1001, ReasonTPM); r.RetryAfter != 60*time.Second {
		t.Fatalf("retry after %v", r.RetryAfter)
	}
	mustAdmit(t, l, c, 1000).Done(1000)
}

func TestSingleNodeParallel(t *testing.T) {
	clk := newClock()
	l := newSingle(clk)
	c := one("key:1", Limits{MaxParallel: 2})
	a := mustAdmit(t, l, c, 0)
	b := mustAdmit(t, l, c, 0)
	r := mustRefuse(t, l, c, 0, ReasonParallel)
	if r.RetryAfter != time.Second || r.Limit != 2 {
		t.Fatalf("refusal %+v", r)
	}
	a.Done(0)
	a.Done(0) // a second Done is a no-op
	c3 := mustAdmit(t, l, c, 0)
	mustRefuse(t, l, c, 0, ReasonParallel)
	b.Done(0)
	c3.Done(0)
	var nilTicket *Ticket
	nilTicket.Done(5) // no panic
	for range 2 {
		defer mustAdmit(t, l, c, 0).Done(0)
	}
}

func TestRefusalCountsNothing(t *testing.T) {
	clk := newClock()
	l := newSingle(clk)
	checks := []Check{
		{Bucket: "key:1", Limits: Limits{RPM: 10, TPM: 100, MaxParallel: 5}},
		{Bucket: "team:1", Limits: Limits{RPM: 1}},
	}
	mustAdmit(t, l, checks, 10) // in flight on purpose
	r := mustRefuse(t, l, checks, 10, ReasonRPM)
	if r.Bucket != "team:1" {
		t.Fatalf("refused by %q", r.Bucket)
	}
	st := l.Status(checks[0])
	if st.RemainingRequests != 9 || st.RemainingTokens != 90 {
		t.Fatalf("refusal counted in key:1: %+v", st)
	}
	// In flight did not move either: 4 more fit.
	only := checks[:1]
	for range 4 {
		mustAdmit(t, l, only, 0)
	}
	mustRefuse(t, l, only, 0, ReasonParallel)
}

func TestDuplicateBucketCountedOnce(t *testing.T) {
	l := newSingle(newClock())
	c := []Check{{Bucket: "x", Limits: Limits{RPM: 2}}, {Bucket: "x", Limits: Limits{RPM: 2}}}
	mustAdmit(t, l, c, 0).Done(0)
	mustAdmit(t, l, c, 0).Done(0)
	mustRefuse(t, l, c, 0, ReasonRPM)
}

func TestTokenCorrection(t *testing.T) {
	clk := newClock()
	l := newSingle(clk)
	c := one("key:1", Limits{TPM: 1000})
	remaining := func() int64 { return l.Status(c[0]).RemainingTokens }

	over := mustAdmit(t, l, c, 500) // overestimate
	if got := remaining(); got != 500 {
		t.Fatalf("remaining after reserve %d", got)
	}
	over.Done(200)
	if got := remaining(); got != 800 {
		t.Fatalf("remaining after overestimate corrected %d, want 800", got)
	}
	clk.Add(10 * time.Second)
	under := mustAdmit(t, l, c, 100) // underestimate
	under.Done(700)
	if got := remaining(); got != 100 {
		t.Fatalf("remaining after underestimate corrected %d, want 100", got)
	}
	mustRefuse(t, l, c, 200, ReasonTPM)
	// Corrections land in the admission second: the 200 expire at 60s,
	// the 700 at 70s.
	clk.Add(50 * time.Second) // t = 60s
	if got := remaining(); got != 300 {
		t.Fatalf("remaining at 60s %d, want 300", got)
	}
	clk.Add(10 * time.Second) // t = 70s
	if got := remaining(); got != 1000 {
		t.Fatalf("remaining at 70s %d, want 1000", got)
	}

	// A request that outlives the window: a positive correction counts
	// in the current second, a negative one has nothing left to correct.
	long := mustAdmit(t, l, c, 100)
	short := mustAdmit(t, l, c, 100)
	clk.Add(61 * time.Second)
	long.Done(400)
	short.Done(0)
	if got := remaining(); got != 700 {
		t.Fatalf("remaining after late corrections %d, want 700", got)
	}
}

func TestWindowSlides(t *testing.T) {
	clk := newClock()
	l := newSingle(clk)
	c := one("key:1", Limits{RPM: 60})
	for range 60 { // one a second for a minute
		mustAdmit(t, l, c, 0).Done(0)
		clk.Add(time.Second)
	}
	// t = 60s: the request of second 0 has expired, nothing else has.
	mustAdmit(t, l, c, 0).Done(0)
	r := mustRefuse(t, l, c, 0, ReasonRPM)
	if r.RetryAfter != time.Second {
		t.Fatalf("retry after %v, want 1s", r.RetryAfter)
	}
	clk.Add(500 * time.Millisecond)
	mustRefuse(t, l, c, 0, ReasonRPM)
	clk.Add(500 * time.Millisecond)
	mustAdmit(t, l, c, 0).Done(0)
	// A long idle gap empties the window.
	clk.Add(10 * time.Minute)
	if st := l.Status(c[0]); st.RemainingRequests != 60 || st.ResetRequests != 0 {
		t.Fatalf("status after idle %+v", st)
	}
}

func TestStatus(t *testing.T) {
	clk := newClock()
	l := newSingle(clk)
	c := Check{Bucket: "key:1", Limits: Limits{RPM: 100, TPM: 10000}}
	if st := l.Status(c); st != (Status{LimitRequests: 100, RemainingRequests: 100, LimitTokens: 10000, RemainingTokens: 10000}) {
		t.Fatalf("fresh status %+v", st)
	}
	mustAdmit(t, l, []Check{c}, 1000).Done(1500)
	clk.Add(20*time.Second + 250*time.Millisecond)
	mustAdmit(t, l, []Check{c}, 500).Done(500)
	clk.Add(750 * time.Millisecond)
	want := Status{
		LimitRequests: 100, RemainingRequests: 98, ResetRequests: 59 * time.Second,
		LimitTokens: 10000, RemainingTokens: 8000, ResetTokens: 59 * time.Second,
	}
	if st := l.Status(c); st != want {
		t.Fatalf("status %+v, want %+v", st, want)
	}
	if st := l.Status(Check{Bucket: "key:1"}); st != (Status{}) {
		t.Fatalf("unlimited status %+v", st)
	}
	if st := l.Status(Check{Bucket: "nope", Limits: Limits{RPM: 3}}); st.RemainingRequests != 3 || st.ResetRequests != 0 {
		t.Fatalf("unknown bucket status %+v", st)
	}
}

func TestUnlimitedAlwaysAdmits(t *testing.T) {
	l := newSingle(newClock())
	c := one("key:1", Limits{})
	for range 1000 {
		mustAdmit(t, l, c, 1<<40)
	}
	tk, r := l.Admit(nil, 0)
	if r != nil || tk == nil {
		t.Fatal("no checks must admit")
	}
	tk.Done(0)
}

func TestManyChecks(t *testing.T) {
	l := newSingle(newClock())
	var checks []Check
	for i := range 20 {
		checks = append(checks, Check{Bucket: string(rune('a' + i)), Limits: Limits{RPM: 2, MaxParallel: 1}})
	}
	tk := mustAdmit(t, l, checks, 1)
	mustRefuse(t, l, checks, 1, ReasonParallel)
	tk.Done(1)
	mustAdmit(t, l, checks, 1).Done(1)
	mustRefuse(t, l, checks, 1, ReasonRPM)
}
