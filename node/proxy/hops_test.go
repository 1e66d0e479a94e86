package proxy_test

import (
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
)

// The handler's own work for an answer (admission, the upstream call, the
// relay, the commit) runs on the request's goroutine: it starts no
// goroutine and waits for none. The hand-offs a request still makes are
// net/http's (its background read of the client connection) and the
// recorders' (the ledger's own test pins that an append on an idle ledger
// waits for no writer goroutine).
func TestHandlerStartsNoGoroutineAndWaitsForNone(t *testing.T) {
	cases := []struct {
		name  string
		tr    http.RoundTripper
		extra []string
	}{
		{"answer", newCannedTransport("application/json", []byte(cannedAnswer)), nil},
		{"stream", newCannedTransport("text/event-stream", []byte(cannedStream())), []string{`"stream":true`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			serve := handlerLoop(t, tc.tr, tc.extra...)
			serve()
			const n = 200
			runtime.SetBlockProfileRate(1)
			defer runtime.SetBlockProfileRate(0)
			created, waits := goroutinesCreated(), handlerWaits()
			for range n {
				serve()
			}
			created, waits = goroutinesCreated()-created, handlerWaits()-waits
			// A few may be the test store's own (Raft's timers and loops);
			// one per request would be n.
			if created > n/10 {
				t.Errorf("%d requests started %d goroutines", n, created)
			}
			if waits > 0 {
				t.Errorf("%d requests waited %d times for another goroutine", n, waits)
			}
		})
	}
}

func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// handlerWaits counts the blocking events recorded so far whose stack
// passes through the handler.
func handlerWaits() int64 {
	recs := make([]runtime.BlockProfileRecord, 64)
	for {
		n, ok := runtime.BlockProfile(recs)
		if ok {
			recs = recs[:n]
			break
		}
		recs = make([]runtime.BlockProfileRecord, n+64)
	}
	var waits int64
	for _, r := range recs {
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			if f.Function == "runtime.gcStart" {
				break // the runtime starting a collection, not a hand-off
			}
			if strings.HasSuffix(f.Function, "proxy.(*Handler).ServeHTTP") {
				waits += r.Count
				break
			}
			if !more {
				break
			}
		}
	}
	return waits
}
