package mcp

import (
	"strings"
	"testing"
)

func TestSessionIDsAreScrubbedFromUpstreamErrors(t *testing.T) {
	const id = "7f3c9e2a-41b8-4d55-9c1e-0a6b2d8e4f11"
	for _, why := range []string{
		// The go-sdk's own phrasings (mcp/streamable.go, v1.8.0).
		"standalone SSE request failed (session ID: " + id + "): EOF",
		"calling \"tools/call\": exceeded 5 retries without progress (session ID: " + id + ")",
		"calling \"tools/call\": failed to reconnect (session ID: " + id + "): dial tcp: refused",
		"calling \"ping\": failed to connect (session ID: " + id + "): session missing",
		"mismatching session IDs \"" + id + "\" and \"" + id + "\"",
		// Anywhere else, when the id is known.
		"session ended: connection closed: " + id,
	} {
		got := scrubSessionID(why, id)
		if strings.Contains(got, id) {
			t.Errorf("scrubSessionID(%q) = %q: the session id is still there", why, got)
		}
		if !strings.Contains(got, redactedSession) {
			t.Errorf("scrubSessionID(%q) = %q: nothing says a session was named", why, got)
		}
	}
	// Without the id at hand, the SDK's phrasings are still caught.
	if got := scrubSessionID("standalone SSE request failed (session ID: abc123XYZ): EOF", ""); strings.Contains(got, "abc123XYZ") {
		t.Errorf("unknown id kept: %q", got)
	}
	// Text naming no session is left as it was.
	for _, why := range []string{"connect: dial tcp 127.0.0.1:1: connection refused", "list: calling \"tools/list\": EOF",
		"tools and prompts: the session ended and the server said so"} {
		if got := scrubSessionID(why, ""); got != why {
			t.Errorf("scrubSessionID(%q) = %q, want it unchanged", why, got)
		}
	}
}
