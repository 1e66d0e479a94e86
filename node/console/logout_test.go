package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
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
			// Logging out again with the copy: it is over already, and
			// the logout answers as the first did.
			if code, body := saved.do("POST", "/api/logout", "", nil); code != http.StatusNoContent {
				t.Fatalf("logout of a session logged out already: %d %s", code, body)
			}
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

// laggingAdmin is the admin connection of a leader that waited for the
// other nodes in vain: its answer to a logout names node n3 in the
// x-tollgate-lagging header, as node.runOnLeader does.
type laggingAdmin struct{ grpc.ClientConnInterface }

func (c laggingAdmin) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	err := c.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
	for _, o := range opts {
		if h, ok := o.(grpc.HeaderCallOption); ok && err == nil && method == pb.UserService_EndConsoleSession_FullMethodName {
			*h.HeaderAddr = metadata.Pairs("x-tollgate-lagging", "n3")
		}
	}
	return err
}

// A logout that some node had not applied when the leader stopped waiting
// does not answer as if every node refused the session already: it names
// the nodes that may still take a copy of the cookie until they catch up.
func TestLogoutSomeNodeHasNotAppliedSaysWhich(t *testing.T) {
	e := startEnv(t, func(_ string, c *Config) { c.Admin = laggingAdmin{c.Admin} })
	c := e.login(t, raftstore.RoleOperator)
	code, body := c.do("POST", "/api/logout", "", nil)
	var got struct {
		Lagging []string `json:"lagging"`
		Message string   `json:"message"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil || !slices.Equal(got.Lagging, []string{"n3"}) ||
		!strings.Contains(got.Message, "n3") {
		t.Fatalf("logout while n3 lags: %d %s", code, body)
	}
	if sessionCookie(t, c) != nil {
		t.Fatal("the session cookie is still set")
	}
	if n := e.store.State().EndedConsoleSessions(); n != 1 {
		t.Fatalf("%d ended sessions, want 1", n)
	}
}

// Every login is a session a logout can add to the replicated state, so
// one user's logins are bounded too, not only each address's: fresh
// addresses (an IPv6 range holds many /64s) do not give one token an
// unbounded number of sessions. Another user is not held back.
func TestLoginsOfOneUserAreBoundedAcrossAddresses(t *testing.T) {
	e := startEnv(t, func(_ string, c *Config) { c.LoginsPerMinute = 3 })
	login := func(role, remote string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/api/login", strings.NewReader(`{"token":"`+e.tokens[role]+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, req)
		return rec
	}
	for i := 1; i <= 3; i++ {
		if rec := login(raftstore.RoleOperator, fmt.Sprintf("[2001:db8:%x::1]:4000", i)); rec.Code != http.StatusOK {
			t.Fatalf("login %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	rec := login(raftstore.RoleOperator, "[2001:db8:ff::1]:4000")
	wantError(t, rec.Code, rec.Body.String(), 429, "ResourceExhausted", "this user")
	if len(rec.Result().Cookies()) != 0 {
		t.Fatal("a session cookie was set on a refused login")
	}
	if rec := login(raftstore.RoleViewer, "[2001:db8:ff::1]:4000"); rec.Code != http.StatusOK {
		t.Fatalf("another user's login: %d %s", rec.Code, rec.Body)
	}
}

// A logout retried after the first one was applied (its answer lost, so
// the browser still holds the cookie) finds the session ended and answers
// as the first did, without a second write to the cluster.
func TestRetriedLogoutAnswersAsTheFirstAndWritesNothing(t *testing.T) {
	e := startEnv(t, nil)
	c := e.login(t, raftstore.RoleViewer)
	retries := []*client{c.copyOf(t), c.copyOf(t)}
	if code, body := c.do("POST", "/api/logout", "", nil); code != http.StatusNoContent {
		t.Fatalf("logout: %d %s", code, body)
	}
	index := e.store.State().Index
	for i, retry := range retries {
		if code, body := retry.do("POST", "/api/logout", "", nil); code != http.StatusNoContent {
			t.Fatalf("retried logout %d: %d %s", i+1, code, body)
		}
		if sessionCookie(t, retry) != nil {
			t.Fatal("the retried logout left the session cookie set")
		}
	}
	if st := e.store.State(); st.Index != index || st.EndedConsoleSessions() != 1 {
		t.Fatalf("after the retries: Raft index %d (was %d), %d ended sessions (want 1)", st.Index, index, st.EndedConsoleSessions())
	}
}

// What a logout answers to a cookie that does not open (a forged or
// altered MAC) is the same whether or not the session it names was ended:
// without the cookie itself, no one learns whether a session existed or
// was logged out. A retried logout succeeds only with the real cookie and
// its CSRF token.
func TestLogoutWithoutTheRealCookieSaysNothingOfTheSession(t *testing.T) {
	e := startEnv(t, nil)
	ended, live := e.login(t, raftstore.RoleViewer), e.login(t, raftstore.RoleViewer)
	endedCopy := ended.copyOf(t)
	if code, body := ended.do("POST", "/api/logout", "", nil); code != http.StatusNoContent {
		t.Fatalf("logout: %d %s", code, body)
	}
	answer := func(c *client) string {
		ck := sessionCookie(t, c)
		forged := c.e.client(t)
		u, _ := url.Parse(e.url)
		forged.http.Jar.SetCookies(u, []*http.Cookie{{Name: SessionCookie, Value: ck.Value[:len(ck.Value)-2] + "AA", Path: "/"}})
		forged.csrf = c.csrf
		code, body := forged.do("POST", "/api/logout", "", nil)
		return fmt.Sprint(code, " ", body)
	}
	if a, b := answer(endedCopy), answer(live); a != b || !strings.HasPrefix(a, "401 ") {
		t.Fatalf("a forged cookie of an ended session got %q, of a live one %q: want the same 401", a, b)
	}
	code, body := endedCopy.do("POST", "/api/logout", "", map[string]string{"X-CSRF-Token": "wrong"})
	wantError(t, code, body, 403, "PermissionDenied", "CSRF")
}
