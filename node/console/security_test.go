package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// A page of another origin can make a browser POST a form (or a no-cors
// fetch) to /api/login with a body that is valid JSON, but not with the
// Content-Type application/json: that would need a CORS preflight, which
// the console never grants. So login requires it, and a cross-site form
// cannot log the victim in to the attacker's account (login CSRF).
func TestLoginRefusesABodyThatIsNotDeclaredJSON(t *testing.T) {
	e := startEnv(t, nil)
	body := `{"token":"` + e.tokens[raftstore.RoleViewer] + `","x":"="}`
	for _, ctype := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		t.Run(ctype, func(t *testing.T) {
			c := e.client(t)
			resp := c.raw("POST", "/api/login", body, map[string]string{"Content-Type": ctype})
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnsupportedMediaType {
				t.Errorf("login with Content-Type %q: %d, want 415", ctype, resp.StatusCode)
			}
			if sessionCookie(t, c) != nil {
				t.Errorf("login with Content-Type %q set the session cookie", ctype)
			}
		})
	}
	c := e.client(t)
	code, resp := c.do("POST", "/api/login", body, map[string]string{"Content-Type": "application/json; charset=utf-8"})
	if code != http.StatusOK {
		t.Fatalf("login with JSON and a charset: %d %s", code, resp)
	}
}

// Rotating a user's token is how an operator answers a leaked one: the
// old token is refused at once, and so must be every console session
// that was opened with it (by whoever held it), while a login with the
// new token works.
func TestRotatingAUsersTokenEndsTheConsoleSessionsOfTheOldToken(t *testing.T) {
	e := startEnv(t, nil)
	c := e.login(t, raftstore.RoleOperator)
	rot, err := pb.NewUserServiceClient(e.admin).RotateUser(bootCtx(t), &pb.RotateUserRequest{Name: "operator-user"})
	if err != nil {
		t.Fatal(err)
	}
	code, body := c.do("GET", "/api/session", "", nil)
	wantError(t, code, body, 401, "Unauthenticated")
	code, body = c.rpc("tollgate.v1.TeamService/CreateTeam", `{"name":"after-rotation"}`)
	wantError(t, code, body, 401, "Unauthenticated")
	e.tokens[raftstore.RoleOperator] = rot.GetToken()
	c = e.login(t, raftstore.RoleOperator)
	if code, body := c.rpc("tollgate.v1.TeamService/CreateTeam", `{"name":"new-token"}`); code != http.StatusOK {
		t.Fatalf("CreateTeam with a session of the new token: %d %s", code, body)
	}
}

// One IPv6 host commonly holds a whole /64, so login attempts from one /64
// share one budget: otherwise a single machine could take fresh addresses
// for unlimited guesses, and fill the limiter's table for everyone else.
func TestLoginRateLimitCountsAnIPv6SlashSixtyFourAsOneAddress(t *testing.T) {
	e := startEnv(t, func(_ string, c *Config) { c.LoginsPerMinute = 3 })
	login := func(remote string) int {
		req := httptest.NewRequest("POST", "/api/login", strings.NewReader(`{"token":"wrong"}`))
		req.Header.Set("Content-Type", "application/json")
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := 1; i <= 3; i++ {
		if code := login(fmt.Sprintf("[2001:db8:1:2::%x]:4000", i)); code != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d, want 401", i, code)
		}
	}
	if code := login("[2001:db8:1:2:ffff::9]:4000"); code != http.StatusTooManyRequests {
		t.Fatalf("a 4th attempt from the same /64: %d, want 429", code)
	}
	for _, other := range []string{"[2001:db8:1:3::1]:4000", "192.0.2.1:4000", "192.0.2.2:4000"} {
		if code := login(other); code != http.StatusUnauthorized {
			t.Errorf("an attempt from %s: %d, want 401", other, code)
		}
	}
}

// The audit log names the address each write came from, not the one the
// session logged in from: a session cookie replayed from elsewhere (or a
// browser that moved) is recorded where it is used.
func TestConsoleWriteIsAuditedFromTheAddressThatMadeIt(t *testing.T) {
	e := startEnv(t, nil)
	serve := func(method, path, body, remote string, hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, req)
		return rec
	}
	rec := serve("POST", "/api/login", `{"token":"`+e.tokens[raftstore.RoleOperator]+`"}`, "203.0.113.1:1000", nil)
	var s sessionBody
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("login: %d %s", rec.Code, rec.Body)
	}
	cookie := rec.Result().Cookies()[0]
	rec = serve("POST", "/api/rpc/tollgate.v1.TeamService/CreateTeam", `{"name":"elsewhere"}`, "198.51.100.7:2000",
		map[string]string{"X-CSRF-Token": s.CSRF, "Cookie": cookie.Name + "=" + cookie.Value})
	if rec.Code != http.StatusOK {
		t.Fatalf("CreateTeam: %d %s", rec.Code, rec.Body)
	}
	if r := e.store.State().AuditRecords(raftstore.AuditFilter{Limit: 1}); len(r) != 1 || r[0].GetUser() != "operator-user" ||
		r[0].GetAddress() != "198.51.100.7:2000" {
		t.Fatalf("audit record of the CreateTeam from 198.51.100.7:2000: %v", r)
	}
}
