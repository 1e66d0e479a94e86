package proxy

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/raftstore"
)

// newAttempt arms an attempt of timeout over parent, as the request path
// does.
func newAttempt(t *testing.T, parent context.Context, timeout time.Duration) *attemptCtx {
	t.Helper()
	h := &Handler{cfg: Config{UpstreamTimeout: timeout}}
	r, _ := http.NewRequestWithContext(parent, http.MethodPost, "http://gateway/", nil)
	a, _ := h.deadline(r, &Record{}, &raftstore.Deployment{ID: "d"})
	t.Cleanup(a.end)
	return a
}

// ran returns an interrupt and a channel closed when it ran.
func ran() (func(), chan struct{}) {
	ch := make(chan struct{})
	return func() { close(ch) }, ch // a second run panics: once only
}

func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen within 10 s", what)
	}
}

// An attempt's time running out interrupts its upstream exchange, says
// it timed out, ends its context (its Done and any context made from it)
// and leaves the request's context alone.
func TestAttemptTimeoutInterruptsAndEndsTheAttemptOnly(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newAttempt(t, parent, time.Millisecond)
	child, stopChild := context.WithCancel(a)
	defer stopChild()
	f, interrupted := ran()
	stop := afterFunc(a, f)
	await(t, interrupted, "the interrupt")
	await(t, a.Done(), "the attempt's Done")
	await(t, child.Done(), "a child's Done")
	if !a.timedOut.Load() || !errors.Is(a.Err(), context.Canceled) || parent.Err() != nil {
		t.Errorf("timedOut %v, Err %v, request's Err %v", a.timedOut.Load(), a.Err(), parent.Err())
	}
	if stop.stop() {
		t.Error("stop says the interrupt had not run")
	}
}

// A client that goes away (the request's context cancelled) interrupts
// the exchange and ends the attempt's context, its timer not fired.
func TestRequestCancelledInterruptsTheAttempt(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	a := newAttempt(t, parent, time.Hour)
	f, interrupted := ran()
	stop := afterFunc(a, f)
	cancel()
	await(t, interrupted, "the interrupt")
	await(t, a.Done(), "the attempt's Done")
	if a.timedOut.Load() || !errors.Is(a.Err(), context.Canceled) {
		t.Errorf("timedOut %v, Err %v", a.timedOut.Load(), a.Err())
	}
	if stop.stop() {
		t.Error("stop says the interrupt had not run")
	}
}

// An interrupt stopped before the attempt ends never runs: the attempt's
// end, its timer and the request's end leave the connection alone, and a
// second registration (a retry on another connection) is the one run.
func TestStoppedInterruptNeverRuns(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	a := newAttempt(t, parent, time.Hour)
	if !afterFunc(a, func() { t.Error("a stopped interrupt ran") }).stop() {
		t.Fatal("stop says the interrupt had run")
	}
	f, interrupted := ran()
	afterFunc(a, f)
	if a.Err() != nil {
		t.Fatalf("Err %v before the attempt ended", a.Err())
	}
	a.end()
	await(t, interrupted, "the second interrupt")
	cancel()
	if a.Err() == nil {
		t.Error("no Err after the attempt ended")
	}
	// Registered after the end: runs at once.
	g, late := ran()
	afterFunc(a, g)
	await(t, late, "an interrupt registered after the end")
}
