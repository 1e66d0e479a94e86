package mcp

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// forgetting serves next as a server that restarted (or evicted its
// sessions) answers the requests of the sessions it forgot: with refuse
// (each MCP SDK answers differently), with no standalone stream (405 to
// GET) that could tell the client otherwise. forget forgets every session
// seen so far, and with always every later one too; with all as well
// every request is refused (a revoked credential).
type forgetting struct {
	next   http.Handler
	refuse http.HandlerFunc

	mu        sync.Mutex
	seen      map[string]bool
	forgotten map[string]bool
	always    bool
	all       bool
}

func (f *forgetting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		http.Error(w, "no stream", http.StatusMethodNotAllowed)
		return
	}
	id := r.Header.Get("Mcp-Session-Id")
	f.mu.Lock()
	gone := f.forgotten[id] || (f.always && (id != "" || f.all))
	if id != "" {
		f.seen[id] = true
	}
	f.mu.Unlock()
	if gone {
		f.refuse(w, r)
		return
	}
	f.next.ServeHTTP(w, r)
}

func (f *forgetting) forget(always bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.seen {
		f.forgotten[id] = true
	}
	f.always = always
}

// refuseWith answers status with body (JSON if it starts with '{').
func refuseWith(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if body != "" && body[0] == '{' {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
			return
		}
		http.Error(w, body, status)
	}
}

// The answers MCP servers give to a request of a session they do not know.
var forgottenSessionAnswers = map[string]http.HandlerFunc{
	"400 with a JSON-RPC error of id null (TypeScript SDK examples)": refuseWith(http.StatusBadRequest,
		`{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`),
	"400 with a JSON-RPC error of its own id (Python SDK)": refuseWith(http.StatusBadRequest,
		`{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Bad Request: No valid session ID provided"}}`),
	"404 with a JSON-RPC error of id null (TypeScript SDK)": refuseWith(http.StatusNotFound,
		`{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}`),
	"404 with a JSON-RPC error of its own id (Python SDK)": refuseWith(http.StatusNotFound,
		`{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Session not found"}}`),
	"404 in plain text (Go SDK)":           refuseWith(http.StatusNotFound, "session not found"),
	"400 in plain text (older Python SDK)": refuseWith(http.StatusBadRequest, "Bad Request: No valid session ID provided"),
	"401 in plain text (Rust SDK)":         refuseWith(http.StatusUnauthorized, "Unauthorized: Session not found"),
}

const forgetfulPrice = 1000

// newForgettingEnv is a gateway connected to the test upstream ("up",
// priced per call) behind a forgetting front that refuses so, and a
// client of key k1.
func newForgettingEnv(t *testing.T, refuse http.HandlerFunc) (*env, *forgetting, *sdk.ClientSession) {
	e := &env{t: t, store: openStore(t)}
	var f *forgetting
	e.upstream = newTestUpstreamServing(t, func(s *sdk.Server) http.Handler {
		f = &forgetting{next: bothProtocols(s), refuse: refuse, seen: map[string]bool{}, forgotten: map[string]bool{}}
		return f
	})
	e.start(Config{})
	e.addPricedServer("up", e.upstream.url, forgetfulPrice)
	cs := e.connect("/mcp", e.addKey("k1", []string{"up__*"}, nil), "", nil)
	return e, f, cs
}

// An upstream that lost the gateway's session (it restarted) refuses the
// session's requests, with 404 as the specification says or 400 as some
// servers do: the call that finds out is sent again on a new session and
// succeeds, charged once; the gateway does not go on sending every key's
// calls to the lost session, where each failed (and, with a JSON-RPC
// error body, was charged) for good.
func TestCallToAnUpstreamThatLostTheSessionGoesAgainOnANewOne(t *testing.T) {
	for name, refuse := range forgottenSessionAnswers {
		t.Run(name, func(t *testing.T) {
			e, f, cs := newForgettingEnv(t, refuse)
			if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo", Arguments: map[string]any{"x": 1}}); err != nil {
				t.Fatalf("a call before the upstream forgot the session: %v", err)
			}
			old, _ := e.gw.upstream("up").session()
			f.forget(false)
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo", Arguments: map[string]any{"x": 2}})
			if err != nil || res.IsError {
				t.Fatalf("the first call after the upstream forgot the session: %v %v", res, err)
			}
			if now, _ := e.gw.upstream("up").session(); now == old || now == nil {
				t.Errorf("the gateway still uses the lost session")
			}
			f.forget(false)
			if _, err := cs.GetPrompt(context.Background(), &sdk.GetPromptParams{Name: "up__greet", Arguments: map[string]string{"who": "x"}}); err != nil {
				t.Fatalf("a prompt after the upstream forgot the new session too: %v", err)
			}
			recs := e.waitRecords(3)
			for i, want := range []int64{forgetfulPrice, forgetfulPrice, 0} {
				if r := recs[i]; r.GetOutcome() != outcomeOK || r.GetCostNanos() != want {
					t.Errorf("record %d: %s cost %d, want ok cost %d", i, r.GetOutcome(), r.GetCostNanos(), want)
				}
			}
			if len(recs) != 3 {
				t.Errorf("%d records for 3 requests", len(recs))
			}
		})
	}
}

// When the new session is refused too (the server forgets every session,
// or the gateway's credential was revoked), the call fails with the
// refusal, uncharged, and the server cools down (its dial failed): a
// server that refuses every session is not dialed again for every call.
func TestCallToAnUpstreamRefusingEverySessionFailsUncharged(t *testing.T) {
	for name, all := range map[string]bool{"every session forgotten": false, "credential revoked": true} {
		t.Run(name, func(t *testing.T) {
			e, f, cs := newForgettingEnv(t, refuseWith(http.StatusUnauthorized, "Unauthorized"))
			f.mu.Lock()
			f.all = all
			f.mu.Unlock()
			f.forget(true)
			_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo", Arguments: map[string]any{"x": 1}})
			if !isRPCError(err, codeUpstreamRefused) {
				t.Fatalf("a call when every session is refused: %v, want refused (-32010)", err)
			}
			if r := e.waitRecords(1)[0]; r.GetCostNanos() != 0 || r.GetOutcome() != outcomeUpstream {
				t.Errorf("the refused call's record: %s cost %d", r.GetOutcome(), r.GetCostNanos())
			}
			if st := e.gw.Status("up"); st.GetState() != stateCooling {
				t.Errorf("after its new session was refused too the server is %v, want cooling down", st)
			}
		})
	}
}

// restartable serves an MCP server as one that can restart: restart
// forgets every session (a new handler) and breaks every connection, as
// a restarted process does.
type restartable struct {
	s   *sdk.Server
	h   atomic.Pointer[http.Handler]
	srv *testUpstream
}

func (r *restartable) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	(*r.h.Load()).ServeHTTP(w, req)
}

func (r *restartable) restart() {
	h := bothProtocols(r.s)
	r.h.Store(&h)
	r.srv.srv.CloseClientConnections()
}

// An upstream that restarts while the node is idle refuses the session's
// standalone stream (404) when the SDK's client opens it again, which
// ends the session: the node opens a new one at once, not after a
// cooldown during which every call is refused as unavailable.
func TestUpstreamThatRestartedWhileIdleGetsANewSessionAtOnce(t *testing.T) {
	e := &env{t: t, store: openStore(t)}
	r := &restartable{}
	e.upstream = newTestUpstreamServing(t, func(s *sdk.Server) http.Handler {
		r.s = s
		h := bothProtocols(s)
		r.h.Store(&h)
		return r
	})
	r.srv = e.upstream
	e.start(Config{Cooldown: time.Hour})
	e.addServer("up", e.upstream.url)
	u := e.gw.upstream("up")
	old, _ := u.session()
	r.restart()
	deadline := time.Now().Add(20 * time.Second)
	for now, _ := u.session(); now == nil || now == old; now, _ = u.session() {
		if st := e.gw.Status("up"); st.GetState() == stateCooling || time.Now().After(deadline) {
			t.Fatalf("after the upstream restarted: %v, want a new session at once", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cs := e.connect("/mcp", e.addKey("k1", []string{"up__*"}, nil), "", nil)
	if res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo", Arguments: map[string]any{"x": 1}}); err != nil || res.IsError {
		t.Fatalf("a call after the upstream restarted: %v %v", res, err)
	}
}

// A request refused for itself (a proxy's 413), on a session the server
// still knows (the ping goes through), is not sent again: only a lost
// session's refusals are.
func TestRequestRefusedForItselfIsSentOnce(t *testing.T) {
	var refused atomic.Int32
	e := &env{t: t, store: openStore(t)}
	e.upstream = newTestUpstreamServing(t, func(s *sdk.Server) http.Handler {
		next := refuseLarge(4096, bothProtocols(s))
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > 4096 {
				refused.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	})
	e.start(Config{})
	e.addServer("up", e.upstream.url)
	old, _ := e.gw.upstream("up").session()
	cs := e.connect("/mcp", e.addKey("k1", []string{"up__*"}, nil), "", nil)
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo",
		Arguments: map[string]any{"x": strings.Repeat("a", 8192)}})
	if !isRPCError(err, codeUpstreamRefused) {
		t.Fatalf("a call the upstream refused with 413: %v", err)
	}
	if n := refused.Load(); n != 1 {
		t.Errorf("the refused request was sent %d times, want once", n)
	}
	if now, _ := e.gw.upstream("up").session(); now != old {
		t.Errorf("a refusal of one request replaced the session")
	}
}
