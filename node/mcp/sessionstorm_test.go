package mcp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// losingEverySession serves next as a server that loses every session
// before its first tool call (a balancer that is not sticky, sessions
// evicted at once): the dial's lists go through, each tools/call of a
// session is answered 404. It counts the sessions opened (initialize).
type losingEverySession struct {
	next  http.Handler
	dials atomic.Int32
}

func (l *losingEverySession) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"method":"initialize"`)) {
			l.dials.Add(1)
		}
		if r.Header.Get("Mcp-Session-Id") != "" && bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
	}
	l.next.ServeHTTP(w, r)
}

// A server that loses the new session too before it answered a call is
// not dialed again at once for every call (each dial is an initialize and
// four lists): it cools down like a server whose dial failed. Every call
// fails uncharged.
func TestUpstreamLosingEveryNewSessionCoolsInsteadOfADialPerCall(t *testing.T) {
	e := &env{t: t, store: openStore(t)}
	var l *losingEverySession
	e.upstream = newTestUpstreamServing(t, func(s *sdk.Server) http.Handler {
		l = &losingEverySession{next: bothProtocols(s)}
		return l
	})
	e.start(Config{Cooldown: time.Hour})
	e.addPricedServer("up", e.upstream.url, forgetfulPrice)
	cs := e.connect("/mcp", e.addKey("k1", []string{"up__*"}, nil), "", nil)
	const calls = 5
	for i := range calls {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo", Arguments: map[string]any{"x": i}})
		if err == nil {
			t.Fatalf("call %d through a server that loses every session: %v", i, res)
		}
	}
	if n := l.dials.Load(); n > 2 {
		t.Errorf("%d sessions opened for %d calls, want at most 2 (the first and one new one)", n, calls)
	}
	if st := e.gw.Status("up"); st.GetState() != stateCooling {
		t.Errorf("a server that lost its new session at once is %v, want cooling down", st)
	}
	for i, r := range e.waitRecords(calls) {
		if r.GetCostNanos() != 0 {
			t.Errorf("record %d: %s charged %d", i, r.GetOutcome(), r.GetCostNanos())
		}
	}
}
