package mcp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
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

// A 404 whose body is the server's JSON-RPC error answering that very
// request (a server that maps "not found" to HTTP 404) is the server
// answering it in a session it knows, not a lost session: the ping tells,
// the session stays and the call is not sent again. Before, each such
// call (one key could send them on purpose) reopened the server's session
// for every key.
func TestNotFoundAnsweringTheRequestItselfKeepsTheSession(t *testing.T) {
	var refused atomic.Int32
	e := &env{t: t, store: openStore(t)}
	e.upstream = newTestUpstreamServing(t, func(s *sdk.Server) http.Handler {
		next := bothProtocols(s)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, ok := toolCallID(r, "fail")
			if !ok {
				next.ServeHTTP(w, r)
				return
			}
			refused.Add(1)
			refuseWith(http.StatusNotFound, `{"jsonrpc":"2.0","id":`+string(id)+`,"error":{"code":-32601,"message":"no such tool"}}`)(w, r)
		})
	})
	e.start(Config{Cooldown: time.Hour})
	e.addServer("up", e.upstream.url)
	sess, _ := e.gw.upstream("up").session()
	cs := e.connect("/mcp", e.addKey("k1", []string{"up__*"}, nil), "", nil)
	for i := range 3 {
		_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__fail", Arguments: map[string]any{"x": i}})
		if !isRPCError(err, codeUpstreamRefused) {
			t.Fatalf("call %d answered 404 with its own JSON-RPC error: %v, want refused (-32010)", i, err)
		}
	}
	if now, _ := e.gw.upstream("up").session(); now != sess {
		t.Errorf("a 404 answering the request itself replaced the session (state %v)", e.gw.Status("up"))
	}
	if n := refused.Load(); n != 3 {
		t.Errorf("3 calls answered 404 reached the server %d times, want 3 (none sent again)", n)
	}
}

// droppingStreams serves next as a server (or a balancer in front of
// several) that ends each session's standalone stream once the gateway
// uses the session (connected says so), asking for a reconnect within
// 1 ms, and answers the reconnect 404: the SDK's client ends the session
// as one the server forgot.
type droppingStreams struct {
	next      http.Handler
	connected func(id string) bool
	dials     atomic.Int32
	mu        sync.Mutex
	seen      map[string]bool
}

func (d *droppingStreams) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Mcp-Session-Id")
	if r.Method != http.MethodGet || id == "" {
		if r.Method == http.MethodPost && id == "" {
			d.dials.Add(1)
		}
		d.next.ServeHTTP(w, r)
		return
	}
	d.mu.Lock()
	again := d.seen[id]
	d.seen[id] = true
	d.mu.Unlock()
	if again {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for deadline := time.Now().Add(10 * time.Second); !d.connected(id) && r.Context().Err() == nil && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	_, _ = w.Write([]byte("retry: 1\n\n"))
}

// A server whose every new session is lost at once this way is not
// dialed again and again without a pause: the second lost session cools
// it down. Before, each lost session was reopened at once, a dial loop
// paced by the server (here every few milliseconds), for good.
func TestUpstreamLosingEveryStandaloneStreamCoolsInsteadOfADialLoop(t *testing.T) {
	e := &env{t: t, store: openStore(t)}
	var d *droppingStreams
	e.upstream = newTestUpstreamServing(t, func(s *sdk.Server) http.Handler {
		d = &droppingStreams{next: bothProtocols(s), seen: map[string]bool{}, connected: func(id string) bool {
			sess, _ := e.gw.upstream("up").session()
			return sess != nil && sess.ID() == id
		}}
		return d
	})
	e.start(Config{Cooldown: time.Hour})
	e.apply(&pb.Command{Op: &pb.Command_PutMcpServer{PutMcpServer: &pb.PutMcpServerCommand{
		Server: &pb.McpServer{Name: "up", Transport: "http", Url: e.upstream.url}}}})
	deadline := time.Now().Add(20 * time.Second)
	for st := e.gw.Status("up"); st.GetState() != stateCooling; st = e.gw.Status("up") {
		if time.Now().After(deadline) {
			t.Fatalf("after %d dials the server is %v, want cooling down", d.dials.Load(), st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("state %v after %d dials", e.gw.Status("up"), d.dials.Load())
	if n := d.dials.Load(); n > 2 {
		t.Errorf("%d dials before cooling down, want at most 2 (the first and one new session)", n)
	}
}
