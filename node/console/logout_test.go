package console

import (
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/tollgate/tollgate/raftstore"
)

// copyOf is another browser holding a copy of c's session cookie and its
// CSRF token (say, stolen before the logout).
func (c *client) copyOf(t *testing.T) *client {
	t.Helper()
	ck := sessionCookie(t, c)
	if ck == nil {
		t.Fatal("no session cookie to copy")
	}
	cp := c.e.client(t)
	u, _ := url.Parse(c.e.url)
	cp.http.Jar.SetCookies(u, []*http.Cookie{{Name: SessionCookie, Value: ck.Value, Path: "/"}})
	cp.csrf = c.csrf
	return cp
}

// Logging out ends the session on the server: a copy of the cookie saved
// before is refused afterwards, for a user's session and the bootstrap
// token's alike, and another session of the same user goes on.
func TestLogoutEndsTheSessionForACopyOfItsCookie(t *testing.T) {
	e := startEnv(t, nil)
	for _, role := range []string{raftstore.RoleOperator, raftstore.RoleAdmin} { // the admin: the bootstrap token
		t.Run(role, func(t *testing.T) {
			c, other := e.login(t, role), e.login(t, role)
			saved := c.copyOf(t)
			if code, body := saved.do("GET", "/api/session", "", nil); code != http.StatusOK {
				t.Fatalf("the copied cookie before logout: %d %s", code, body)
			}
			if code, body := c.do("POST", "/api/logout", "", nil); code != http.StatusNoContent {
				t.Fatalf("logout: %d %s", code, body)
			}
			code, body := saved.do("GET", "/api/session", "", nil)
			wantError(t, code, body, 401, "Unauthenticated", "logged out")
			code, body = saved.rpc("tollgate.v1.TeamService/ListTeams", `{}`)
			wantError(t, code, body, 401, "Unauthenticated")
			code, body = saved.do("GET", "/api/spend.csv", "", nil)
			wantError(t, code, body, 401, "Unauthenticated")
			// Logging out again with the copy: it is over already.
			code, body = saved.do("POST", "/api/logout", "", nil)
			wantError(t, code, body, 401, "Unauthenticated")
			if code, body := other.do("GET", "/api/session", "", nil); code != http.StatusOK {
				t.Fatalf("another session of the same user after logout: %d %s", code, body)
			}
		})
	}
	if n := e.store.State().EndedConsoleSessions(); n != 2 {
		t.Fatalf("%d ended sessions recorded, want 2", n)
	}
}

func TestLogoutWithoutASessionIsUnauthenticated(t *testing.T) {
	e := startEnv(t, nil)
	code, body := e.client(t).do("POST", "/api/logout", "", nil)
	wantError(t, code, body, 401, "Unauthenticated", "not logged in")
}

// While some member of the cluster cannot apply the logout (an older
// release during a rolling upgrade), the cookie is still cleared and the
// answer says the session could not be ended on the server.
func TestLogoutTheClusterCannotRecordClearsTheCookieAndSaysSo(t *testing.T) {
	e := startEnv(t, nil)
	c := e.login(t, raftstore.RoleOperator)
	e.store.SetProposeGate(func(cmd string) error {
		if cmd == "end_console_session" {
			return errors.New("node n2 does not support it yet")
		}
		return nil
	})
	t.Cleanup(func() { e.store.SetProposeGate(nil) })
	code, body := c.do("POST", "/api/logout", "", nil)
	wantError(t, code, body, 409, "FailedPrecondition", "signed out in this browser", "could not be ended on the server", "does not support")
	if sessionCookie(t, c) != nil {
		t.Fatal("the session cookie is still set after a logout the cluster could not record")
	}
}
