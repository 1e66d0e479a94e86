package mcp

import (
	"net/http"
	"strings"
	"testing"
)

// Without a valid key, /mcp/NAME answers 401 whether or not NAME is
// configured: an unauthenticated client cannot learn the servers' names.
func TestPerServerEndpointDoesNotRevealServersWithoutKey(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	for _, path := range []string{"/mcp/up", "/mcp/nope"} {
		for _, secret := range []string{"", "sk-wrong"} {
			req, _ := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			if secret != "" {
				req.Header.Set("Authorization", "Bearer "+secret)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s with key %q: %d, want 401", path, secret, resp.StatusCode)
			}
		}
	}
}

// One key cannot use the session another key opened.
func TestSessionOfAnotherKeyRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	a := e.addKey("ka", []string{"*"}, nil)
	b := e.addKey("kb", []string{"*"}, nil)
	cs := e.connect("/mcp", a, "2025-11-25", nil)
	req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+b)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("key b on key a's session: %d, want 403", resp.StatusCode)
	}
}
