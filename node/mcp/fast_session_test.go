package mcp

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawSession initializes a session-protocol session with raw requests and
// returns its id.
func rawSession(t *testing.T, e *env, secret string) string {
	t.Helper()
	h := map[string]string{"Mcp-Protocol-Version": ""}
	resp, body := postSessionless(t, e, secret, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, h)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	h = map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid}
	if resp, body := postSessionless(t, e, secret, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", resp.StatusCode, body)
	}
	return sid
}

// A plain call in a session is answered with one JSON response, without
// the sessionless protocol's marks; another key cannot use the session.
func TestSessionCallAnsweredWithJSON(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	secret, other := e.addKey("k1", []string{"*"}, nil), e.addKey("k2", []string{"*"}, nil)
	sid := rawSession(t, e, secret)
	h := map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","arguments":{"a":1}}}`
	resp, body := postSessionless(t, e, secret, call, h)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" ||
		!strings.Contains(body, `echo:{\"a\":1}`) || strings.Contains(body, "serverInfo") || !strings.Contains(body, `"id":2`) {
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if resp, body := postSessionless(t, e, other, call, h); resp.StatusCode == 200 || strings.Contains(body, "echo:") {
		t.Fatalf("another key's request in the session: %d %s", resp.StatusCode, body)
	}
	if n := len(e.waitRecords(1)); n != 1 {
		t.Fatalf("%d records, want 1", n)
	}
}

// A request in a session with a protocol version the gateway does not
// speak is refused (400, as the SDK answers it), not served by the fast
// path.
func TestSessionCallWithUnknownProtocolVersionIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", []string{"*"}, nil)
	sid := rawSession(t, e, secret)
	h := map[string]string{"Mcp-Protocol-Version": "2020-01-01", "Mcp-Session-Id": sid}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","arguments":{"a":1}}}`
	if resp, body := postSessionless(t, e, secret, call, h); resp.StatusCode != http.StatusBadRequest || strings.Contains(body, "echo:") {
		t.Fatalf("a call with an unknown protocol version: %d %s, want 400", resp.StatusCode, body)
	}
	e.mu.Lock()
	n := len(e.records)
	e.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d records of a refused call, want 0", n)
	}
}

// A call without a progress token, cancelled by the client, is cancelled
// upstream and recorded as cancelled, in both protocol eras.
func TestCallWithoutProgressCancelledUpstream(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", []string{"up__slow"}, nil)
	for i, v := range versions {
		t.Run(v, func(t *testing.T) {
			cs := e.connect("/mcp", secret, v, nil)
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "up__slow"})
				errc <- err
			}()
			e.cancelUpstream(t, cancel, errc, i)
		})
	}
}

// notifications/cancelled for a call the fast path holds cancels it
// upstream while its request stays open.
func TestSessionCancelNotificationCancelsCall(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", []string{"*"}, nil)
	sid := rawSession(t, e, secret)
	h := map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid}
	done := make(chan string, 1)
	go func() {
		_, body := postSessionless(t, e, secret, `{"jsonrpc":"2.0","id":"slow-1","method":"tools/call","params":{"name":"up__slow"}}`, h)
		done <- body
	}()
	<-e.upstream.started
	resp, body := postSessionless(t, e, secret, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow-1"}}`, h)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", resp.StatusCode, body)
	}
	select {
	case <-e.upstream.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream call was not cancelled")
	}
	if body := <-done; !strings.Contains(body, `"id":"slow-1"`) || !strings.Contains(body, "cancelled") {
		t.Fatalf("the cancelled call's answer: %s", body)
	}
	if r := e.waitRecords(1)[0]; r.GetOutcome() != outcomeCancelled {
		t.Fatalf("record %v", r)
	}
}

// Only the key that opened a session keeps it from idling: another key's
// requests naming it (which the SDK refuses with 403) leave it as idle as
// it was, so a leaked session id cannot keep a session open forever.
func TestAnotherKeysRequestsDoNotKeepSessionAlive(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	sid := rawSession(t, e, e.addKey("k1", []string{"*"}, nil))
	other := e.addKey("k2", []string{"*"}, nil)
	last := func() time.Time {
		e.gw.sessions.mu.Lock()
		defer e.gw.sessions.mu.Unlock()
		return e.gw.sessions.byID[sid].last
	}
	before := last()
	h := map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid}
	if resp, body := postSessionless(t, e, other, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`, h); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another key's request: %d %s", resp.StatusCode, body)
	}
	if after := last(); !after.Equal(before) {
		t.Fatalf("another key's request moved the session's last use from %v to %v", before, after)
	}
}
