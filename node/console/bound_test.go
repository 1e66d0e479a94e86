package console

import (
	"net/http"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/raftstore"
)

// At the bound on ended sessions no ended session is let in again: a
// logout that would pass it is refused (the cookie is still cleared, and
// the answer says the session stays valid until it expires), new logins
// are refused with a clear error, the sessions ended before stay ended,
// and a retried logout of one of them still succeeds.
func TestAtTheBoundOnEndedSessionsLoginsAndNewLogoutsAreRefused(t *testing.T) {
	e := startEnvBounded(t, 2, nil)
	a, b, banked := e.login(t, raftstore.RoleOperator), e.login(t, raftstore.RoleOperator), e.login(t, raftstore.RoleOperator)
	aCopy, bCopy := a.copyOf(t), b.copyOf(t)
	for _, c := range []*client{a, b} {
		if code, body := c.do("POST", "/api/logout", "", nil); code != http.StatusNoContent {
			t.Fatalf("logout below the bound: %d %s", code, body)
		}
	}
	code, body := e.client(t).do("POST", "/api/login", `{"token":"`+e.tokens[raftstore.RoleViewer]+`"}`, nil)
	wantError(t, code, body, 429, "ResourceExhausted", "logins are refused", "expire")
	bankedCopy := banked.copyOf(t)
	code, body = banked.do("POST", "/api/logout", "", nil)
	wantError(t, code, body, 429, "ResourceExhausted", "could not be ended on the server", "most ended console sessions")
	if sessionCookie(t, banked) != nil {
		t.Fatal("the refused logout left the session cookie set")
	}
	if code, body := bankedCopy.do("GET", "/api/session", "", nil); code != http.StatusOK {
		t.Fatalf("the session whose logout was refused (and said so): %d %s", code, body)
	}
	for _, c := range []*client{aCopy, bCopy} {
		code, body := c.do("GET", "/api/session", "", nil)
		wantError(t, code, body, 401, "Unauthenticated", "logged out")
	}
	if code, body := aCopy.do("POST", "/api/logout", "", nil); code != http.StatusNoContent {
		t.Fatalf("a retried logout at the bound: %d %s", code, body)
	}
	if n := e.store.State().EndedConsoleSessions(); n != 2 {
		t.Fatalf("%d ended sessions, want the bound, 2", n)
	}
}

// Logouts sent at once cannot pass the bound together: the leader checks
// it and applies one logout at a time.
func TestConcurrentLogoutsDoNotPassTheBound(t *testing.T) {
	const bound, n = 3, 12
	e := startEnvBounded(t, bound, func(_ string, c *Config) { c.LoginsPerMinute = n })
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = e.login(t, raftstore.RoleOperator)
	}
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { codes[i], _ = c.do("POST", "/api/logout", "", nil) })
	}
	wg.Wait()
	ok := 0
	for _, code := range codes {
		if code == http.StatusNoContent {
			ok++
		} else if code != http.StatusTooManyRequests {
			t.Errorf("a logout answered %d", code)
		}
	}
	if got := e.store.State().EndedConsoleSessions(); ok != bound || got != bound {
		t.Fatalf("%d logouts succeeded and %d sessions are ended, want %d and %d", ok, got, bound, bound)
	}
}
