package console

import (
	"net/http"
	"testing"

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
