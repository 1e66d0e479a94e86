package mcp

import (
	"context"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

const sessionVersionForTests = "2025-11-25"

// waitFor polls cond until it holds (at most 10 s).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A key holds at most MaxSessionsPerKey sessions: opening one more closes
// its least recently used one; the others, and other keys' sessions, go on.
func TestSessionsPerKeyCappedLeastRecentlyUsedClosed(t *testing.T) {
	e := &env{t: t, store: openStore(t), upstream: newTestUpstream(t)}
	e.start(Config{MaxSessionsPerKey: 2})
	e.addServer("up", e.upstream.url)
	k1, k2 := e.addKey("k1", []string{"*"}, nil), e.addKey("k2", []string{"*"}, nil)
	call := func(cs *sdk.ClientSession) error {
		_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo"})
		return err
	}
	first := e.connect("/mcp", k1, sessionVersionForTests, nil)
	second := e.connect("/mcp", k1, sessionVersionForTests, nil)
	other := e.connect("/mcp", k2, sessionVersionForTests, nil)
	if err := call(first); err != nil { // first is now more recently used than second
		t.Fatal(err)
	}
	third := e.connect("/mcp", k1, sessionVersionForTests, nil)
	if n := e.gw.sessions.count("k1"); n != 2 {
		t.Fatalf("k1 holds %d sessions, want 2", n)
	}
	waitFor(t, "the least recently used session closed", func() bool { return call(second) != nil })
	for name, cs := range map[string]*sdk.ClientSession{"first": first, "third": third, "another key's": other} {
		if err := call(cs); err != nil {
			t.Fatalf("%s session: %v", name, err)
		}
	}
}

// An idle session is closed after SessionTimeout and forgotten.
func TestIdleSessionExpires(t *testing.T) {
	e := &env{t: t, store: openStore(t), upstream: newTestUpstream(t)}
	e.start(Config{SessionTimeout: 100 * time.Millisecond})
	e.addServer("up", e.upstream.url)
	cs := e.connect("/mcp", e.addKey("k1", []string{"*"}, nil), sessionVersionForTests, nil)
	if n := e.gw.sessions.count("k1"); n != 1 {
		t.Fatalf("k1 holds %d sessions, want 1", n)
	}
	waitFor(t, "the idle session forgotten", func() bool { return e.gw.sessions.count("k1") == 0 })
	if _, err := cs.ListTools(context.Background(), nil); err == nil {
		t.Fatal("an expired session still answered")
	}
}

// prompts/get counts against the key's rate limits like a tool call, and
// every one is recorded, refused ones too.
func TestPromptGetRateLimitedAndRecorded(t *testing.T) {
	e := newEnv(t, newLimiter())
	e.addServer("up", e.upstream.url)
	cs := e.connect("/mcp", e.addKey("k1", []string{"up__greet"}, &pb.RateLimits{Rpm: 2}), "", nil)
	get := func(name string) error {
		_, err := cs.GetPrompt(context.Background(), &sdk.GetPromptParams{Name: name, Arguments: map[string]string{"who": "you"}})
		return err
	}
	if err := get("up__secret"); !isRPCError(err, -32602) {
		t.Fatalf("a prompt outside the allow-list: %v", err)
	}
	for range 2 {
		if err := get("up__greet"); err != nil {
			t.Fatal(err)
		}
	}
	if err := get("up__greet"); !isRPCError(err, codeGateway) || !strings.Contains(err.Error(), "Rate limit") {
		t.Fatalf("third get: %v, want rate limited", err)
	}
	recs := e.waitRecords(4)
	for i, want := range []struct{ outcome, model string }{{outcomeRefused, "mcp-prompt:up__secret"},
		{outcomeOK, "mcp-prompt:up__greet"}, {outcomeOK, "mcp-prompt:up__greet"}, {outcomeRateLimited, "mcp-prompt:up__greet"}} {
		if r := recs[i]; r.GetOutcome() != want.outcome || r.GetModel() != want.model {
			t.Fatalf("record %d: %v, want %+v", i, r, want)
		}
	}
	if r := recs[1]; r.GetMcpTool() != "greet" || r.GetResponseBytes() == 0 || r.GetCostNanos() != 0 {
		t.Fatalf("record %v", r)
	}
}
