package console

import (
	"net/http"
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
