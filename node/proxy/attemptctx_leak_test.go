package proxy

import (
	"context"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate/tollgate/raftstore"
)

func newAttemptOf(parent context.Context, timeout time.Duration) *attemptCtx {
	h := &Handler{cfg: Config{UpstreamTimeout: timeout}}
	r, _ := http.NewRequestWithContext(parent, http.MethodPost, "http://gateway/", nil)
	a, _ := h.deadline(r, &Record{}, &raftstore.Deployment{ID: "d"})
	return a
}

// registrations counts what is registered on a context.WithCancel
// context: its children (child contexts and context.AfterFunc
// registrations), which a finished attempt must have removed.
func registrations(t *testing.T, ctx context.Context) int {
	t.Helper()
	v := reflect.ValueOf(ctx).Elem().FieldByName("children")
	if !v.IsValid() {
		t.Fatalf("%T has no children field", ctx)
	}
	return v.Len()
}

// An attempt leaves nothing registered on the request's context once it
// ended, whichever way it went: no child, no interrupt (each would hold
// memory until the request ends, one per attempt and retry).
func TestFinishedAttemptLeavesNothingOnTheRequestsContext(t *testing.T) {
	steps := map[string]func(t *testing.T, a *attemptCtx){
		"ended":              func(t *testing.T, a *attemptCtx) {},
		"done asked":         func(t *testing.T, a *attemptCtx) { _ = a.Done() },
		"interrupt stopped":  func(t *testing.T, a *attemptCtx) { afterFunc(a, func() {}).stop() },
		"interrupt pending":  func(t *testing.T, a *attemptCtx) { afterFunc(a, func() {}) },
		"sent again":         func(t *testing.T, a *attemptCtx) { afterFunc(a, func() {}).stop(); afterFunc(a, func() {}) },
		"done and interrupt": func(t *testing.T, a *attemptCtx) { _ = a.Done(); afterFunc(a, func() {}).stop() },
		"timed out": func(t *testing.T, a *attemptCtx) {
			f, interrupted := ran()
			stop := afterFunc(a, f)
			a.timer.Reset(time.Nanosecond)
			await(t, interrupted, "the interrupt")
			stop.stop()
		},
		"child of the attempt": func(t *testing.T, a *attemptCtx) {
			c, cancel := context.WithCancel(a)
			defer cancel()
			_ = c.Done()
		},
	}
	for name, step := range steps {
		t.Run(name, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.Background())
			defer cancel()
			for range 100 {
				a := newAttemptOf(parent, time.Hour)
				step(t, a)
				a.end()
			}
			if n := registrations(t, parent); n != 0 {
				t.Errorf("%d registrations left on the request's context after 100 attempts", n)
			}
		})
	}
}
