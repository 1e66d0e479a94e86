package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/tollgate/tollgate/raftstore"
)

// startOIDC starts a test identity provider and a console that signs in
// through it.
func startOIDC(t *testing.T) (*env, *mockoidc.MockOIDC) {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	roles, err := ParseRoleMap("platform-admins=admin, sre=operator, finance=viewer")
	if err != nil {
		t.Fatal(err)
	}
	e := startEnv(t, func(u string, c *Config) {
		cfg := m.Config()
		c.OIDC = &OIDCConfig{Issuer: cfg.Issuer, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
			RedirectURL: u + "/api/oidc/callback", Roles: roles}
	})
	return e, m
}

func TestOIDCLoginMapsTheRoleClaim(t *testing.T) {
	e, m := startOIDC(t)
	m.QueueUser(&mockoidc.MockUser{Subject: "u-1", Email: "sam@example.com", EmailVerified: true, Groups: []string{"staff", "sre", "finance"}})
	c := e.client(t)
	if code, body := c.do("GET", "/api/config", "", nil); code != 200 || !strings.Contains(body, `"oidc":true`) {
		t.Fatalf("/api/config: %d %s", code, body)
	}
	resp := c.raw("GET", "/api/oidc/login", "", nil) // follows the redirects: provider, callback, "/"
	resp.Body.Close()
	if resp.Request.URL.Path != "/" {
		t.Fatalf("the login ended at %s, want /", resp.Request.URL)
	}
	code, body := c.do("GET", "/api/session", "", nil)
	var s sessionBody
	if err := json.Unmarshal([]byte(body), &s); err != nil || code != 200 || s.User != "oidc:sam@example.com" || s.Role != raftstore.RoleOperator {
		t.Fatalf("session after single sign-on: %d %s (want oidc:sam@example.com as operator: sre comes before finance)", code, body)
	}
	c.csrf = s.CSRF
	code, body = c.rpc("tollgate.v1.TeamService/CreateTeam", `{"name":"sso-team"}`)
	if code != 200 {
		t.Fatalf("operator through SSO CreateTeam: %d %s", code, body)
	}
	if r := e.store.State().AuditRecords(raftstore.AuditFilter{Limit: 1}); len(r) != 1 || r[0].GetUser() != "oidc:sam@example.com" {
		t.Fatalf("audit: %v", r)
	}
	code, body = c.rpc("tollgate.v1.UserService/CreateUser", `{"name":"x","role":"viewer"}`)
	wantError(t, code, body, 403, "PermissionDenied", "users.write")
}

// An email the provider does not mark verified does not name the user:
// the session and the audit log carry the subject instead.
func TestOIDCUnverifiedEmailIsNotTheUserName(t *testing.T) {
	e, m := startOIDC(t)
	m.QueueUser(&mockoidc.MockUser{Subject: "u-9", Email: "ceo@example.com", EmailVerified: false, Groups: []string{"sre"}})
	c := e.client(t)
	resp := c.raw("GET", "/api/oidc/login", "", nil)
	resp.Body.Close()
	code, body := c.do("GET", "/api/session", "", nil)
	var s sessionBody
	if err := json.Unmarshal([]byte(body), &s); err != nil || code != 200 || s.User != "oidc:u-9" {
		t.Fatalf("session of a user with an unverified email: %d %s (want oidc:u-9)", code, body)
	}
}

func TestOIDCUserWithoutAMappedGroupIsRefused(t *testing.T) {
	e, m := startOIDC(t)
	m.QueueUser(&mockoidc.MockUser{Subject: "u-2", Email: "eve@example.com", EmailVerified: true, Groups: []string{"engineering"}})
	c := e.client(t)
	code, body := c.do("GET", "/api/oidc/login", "", nil)
	if code != http.StatusForbidden || !strings.Contains(body, "eve@example.com") || !strings.Contains(body, "none of the groups") {
		t.Fatalf("unmapped user: %d %s", code, body)
	}
	if code, _ := c.do("GET", "/api/session", "", nil); code != 401 {
		t.Fatalf("an unmapped user has a session: %d", code)
	}
}

// The callback refuses a state that is not the login's (a forged or
// replayed callback), and a callback without the login's cookie.
func TestOIDCCallbackRefusesABadState(t *testing.T) {
	e, m := startOIDC(t)
	m.QueueUser(&mockoidc.MockUser{Subject: "u-3", Email: "ann@example.com", EmailVerified: true, Groups: []string{"platform-admins"}})
	c := e.client(t)
	c.http.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Path == "/api/oidc/callback" {
			return http.ErrUseLastResponse // stop before the callback
		}
		return nil
	}
	resp := c.raw("GET", "/api/oidc/login", "", nil)
	resp.Body.Close()
	cb, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || cb.Query().Get("code") == "" {
		t.Fatalf("no callback with a code: %d %v", resp.StatusCode, resp.Header)
	}
	q := cb.Query()
	q.Set("state", "forged-"+q.Get("state"))
	code, body := c.do("GET", "/api/oidc/callback?"+q.Encode(), "", nil)
	if code != http.StatusBadRequest || !strings.Contains(body, "not valid") {
		t.Fatalf("forged state: %d %s", code, body)
	}
	// The refusal ended the login: its cookie is gone, so the genuine
	// callback is refused too.
	code, _ = c.do("GET", "/api/oidc/callback?"+cb.RawQuery, "", nil)
	if code != http.StatusBadRequest {
		t.Fatalf("callback after the login's cookie was cleared: %d", code)
	}
	if code, _ := c.do("GET", "/api/session", "", nil); code != 401 {
		t.Fatalf("session after refused callbacks: %d", code)
	}
}

func TestParseRoleMap(t *testing.T) {
	got, err := ParseRoleMap("platform-admins=admin,sre=operator,finance=viewer,team-a-leads=team-admin:team_a")
	if err != nil || len(got) != 4 || got[3] != (RoleMapping{Group: "team-a-leads", Role: "team-admin", TeamID: "team_a"}) {
		t.Fatalf("ParseRoleMap = %v, %v", got, err)
	}
	for _, bad := range []string{"", "sre", "sre=root", "leads=team-admin", "sre=operator:team_a", "=admin"} {
		if _, err := ParseRoleMap(bad); err == nil {
			t.Errorf("ParseRoleMap(%q) accepted", bad)
		}
	}
}

// Without an email the user is named by the token's subject.
func TestOIDCUserWithoutEmailIsNamedBySubject(t *testing.T) {
	e, m := startOIDC(t)
	m.QueueUser(&mockoidc.MockUser{Subject: "u-77", Groups: []string{"finance"}})
	c := e.client(t)
	resp := c.raw("GET", "/api/oidc/login", "", nil)
	resp.Body.Close()
	code, body := c.do("GET", "/api/session", "", nil)
	if code != 200 || !strings.Contains(body, `"user":"oidc:u-77"`) || !strings.Contains(body, `"role":"viewer"`) {
		t.Fatalf("session: %d %s", code, body)
	}
}

// The provider is asked for its discovery document at the first sign-in:
// a provider that cannot be reached does not keep the console from
// starting, and its sign-in page says so.
func TestOIDCProviderDownAtStart(t *testing.T) {
	roles, _ := ParseRoleMap("sre=operator")
	e := startEnv(t, func(u string, c *Config) {
		c.OIDC = &OIDCConfig{Issuer: "http://127.0.0.1:1/realms/none", ClientID: "tg", RedirectURL: u + "/api/oidc/callback", Roles: roles}
	})
	code, body := e.client(t).do("GET", "/api/oidc/login", "", nil)
	if code != http.StatusBadGateway || !strings.Contains(body, "cannot be reached") {
		t.Fatalf("sign-in with the provider down: %d %s", code, body)
	}
	c := e.login(t, raftstore.RoleViewer) // tokens still work
	if code, _ := c.do("GET", "/api/session", "", nil); code != 200 {
		t.Fatalf("token session: %d", code)
	}
}
