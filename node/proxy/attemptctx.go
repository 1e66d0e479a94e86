package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// attemptCtx is an upstream attempt's context: the request's, ended also
// when the attempt's timer fires (timedOut says so) and when the attempt
// is over (end). It costs an attempt no context of its own: the gateway's
// HTTP/1.1 client registers its interrupt with it directly (onInterrupt),
// which hangs it on the request's context (for a client that goes away)
// and on the timer, one registration instead of a child context between
// them. Only a caller that asks for its Done channel (net/http's
// transport, for HTTP/2 and proxies) gets a child context made then.
type attemptCtx struct {
	context.Context // the request's
	timer           *time.Timer
	timedOut        atomic.Bool

	child atomic.Pointer[childCtx] // made by Done; cancelled when the attempt ends

	mu    sync.Mutex
	ended bool // end ran (the timer fired, or the attempt is over)
	// The interrupt registered by onInterrupt: run once (by the attempt's
	// end, or by the request's context: stopParent) unless stopped first.
	interrupt   func()
	interrupted bool
	stopParent  func() bool
}

// childCtx is the context an attemptCtx's Done and Err come from once
// something asked for its Done channel.
type childCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// fire is the timer's: the attempt's time is up.
// It leaves a.timer alone: it may fire before deadline has set it.
func (a *attemptCtx) fire() {
	a.timedOut.Store(true)
	a.finish()
}

// end ends the attempt: its timer stopped, its child context (if any)
// cancelled, its interrupt (if still registered) run.
func (a *attemptCtx) end() {
	a.timer.Stop()
	a.finish()
}

func (a *attemptCtx) finish() {
	a.mu.Lock()
	a.ended = true
	a.mu.Unlock()
	if c := a.child.Load(); c != nil {
		c.cancel()
	}
	a.runInterrupt()
}

// Done implements context.Context: a child of the request's context,
// made on first use, cancelled when the attempt ends.
func (a *attemptCtx) Done() <-chan struct{} { return a.childContext().Done() }

// Err implements context.Context.
func (a *attemptCtx) Err() error {
	if c := a.child.Load(); c != nil {
		return c.ctx.Err()
	}
	a.mu.Lock()
	ended := a.ended
	a.mu.Unlock()
	if ended {
		return context.Canceled
	}
	return a.Context.Err()
}

// Value implements context.Context: the child context's values once it is
// made (so that a context made from this one finds the child to hang on),
// else the request's.
func (a *attemptCtx) Value(key any) any {
	if c := a.child.Load(); c != nil {
		return c.ctx.Value(key)
	}
	return a.Context.Value(key)
}

func (a *attemptCtx) childContext() context.Context {
	if c := a.child.Load(); c != nil {
		return c.ctx
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.child.Load()
	if c == nil {
		ctx, cancel := context.WithCancel(a.Context)
		c = &childCtx{ctx, cancel}
		a.child.Store(c)
		if a.ended {
			cancel()
		}
	}
	return c.ctx
}

// onInterrupt registers f to run when the request's context ends (on
// it directly) or the attempt does (its timer fired, or end), as
// context.AfterFunc would on a child context; stop unregisters it. One
// registration at a time.
func (a *attemptCtx) onInterrupt(f func()) {
	stopParent := context.AfterFunc(a.Context, f)
	a.mu.Lock()
	a.interrupt, a.interrupted, a.stopParent = f, false, stopParent
	ended := a.ended
	a.mu.Unlock()
	if ended {
		a.runInterrupt()
	}
}

// runInterrupt runs the registered interrupt, unless the request's
// context already began running it: once.
func (a *attemptCtx) runInterrupt() {
	a.mu.Lock()
	f, stopParent := a.interrupt, a.stopParent
	if f != nil {
		a.interrupt, a.stopParent, a.interrupted = nil, nil, true
	}
	a.mu.Unlock()
	if f == nil || stopParent != nil && !stopParent() {
		return
	}
	f()
}

// stop unregisters the interrupt, and reports whether it had not run.
func (a *attemptCtx) stop() bool {
	a.mu.Lock()
	ran, stopParent := a.interrupted, a.stopParent
	a.interrupt, a.stopParent = nil, nil
	a.mu.Unlock()
	if stopParent != nil && !stopParent() {
		ran = true // the request's context ended: f began
	}
	return !ran
}

// interruptStopper unregisters an interrupt (see afterFunc): stop reports
// whether it had not begun.
type interruptStopper interface{ stop() bool }

// ctxStop is context.AfterFunc's stop.
type ctxStop func() bool

func (s ctxStop) stop() bool { return s() }

// afterFunc is context.AfterFunc, or for an attempt's context its own
// registration (one on the request's context, none on a child).
func afterFunc(ctx context.Context, f func()) interruptStopper {
	if a, ok := ctx.(*attemptCtx); ok {
		a.onInterrupt(f)
		return a
	}
	return ctxStop(context.AfterFunc(ctx, f))
}
