package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// One user's logins on a node are bounded over a session's lifetime too,
// not only per minute: each can become an ended session the cluster keeps
// until it expires, so without it a few users logging in and out at the
// per-minute rate fill the set for everyone. Another user is not held
// back, and the user's logins come back once the window has passed.
func TestOneUsersLoginsOnANodeAreBoundedOverASessionLifetime(t *testing.T) {
	var offset atomic.Int64 // nanoseconds the console's clock is ahead
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	e := startEnv(t, func(_ string, c *Config) { c.LoginsPerSessionLife, c.Now = 4, clock })
	login := func(role string, i int) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/api/login", strings.NewReader(`{"token":"`+e.tokens[role]+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.RemoteAddr = fmt.Sprintf("[2001:db8:%x::1]:4000", i) // the address limit is not the one tested
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, req)
		return rec
	}
	for i := 1; i <= 4; i++ {
		if rec := login(raftstore.RoleOperator, i); rec.Code != http.StatusOK {
			t.Fatalf("login %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	offset.Store(int64(time.Hour)) // the per-minute limit has long reset
	rec := login(raftstore.RoleOperator, 5)
	wantError(t, rec.Code, rec.Body.String(), 429, "ResourceExhausted", "this user", "within 8h5m0s")
	if len(rec.Result().Cookies()) != 0 {
		t.Fatal("a session cookie was set on a refused login")
	}
	if rec := login(raftstore.RoleViewer, 6); rec.Code != http.StatusOK {
		t.Fatalf("another user's login: %d %s", rec.Code, rec.Body)
	}
	offset.Store(int64(userLifeWindow))
	if rec := login(raftstore.RoleOperator, 7); rec.Code != http.StatusOK {
		t.Fatalf("a login once the window has passed: %d %s", rec.Code, rec.Body)
	}
}
