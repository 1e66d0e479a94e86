package console

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"

	"google.golang.org/grpc/codes"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

func sessionCookie(t *testing.T, c *client) *http.Cookie {
	t.Helper()
	u, _ := url.Parse(c.e.url)
	for _, ck := range c.http.Jar.Cookies(u) {
		if ck.Name == SessionCookie {
			return ck
		}
	}
	return nil
}

func TestLoginSessionLogout(t *testing.T) {
	e := startEnv(t, nil)
	c := e.client(t)
	resp := c.raw("POST", "/api/login", `{"token":"`+e.tokens[raftstore.RoleOperator]+`"}`, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	var set *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == SessionCookie {
			set = ck
		}
	}
	if set == nil || !set.HttpOnly || set.SameSite != http.SameSiteStrictMode || set.Path != "/" || set.MaxAge != 8*3600 || set.Secure {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, 8 h, not Secure without TLS", set)
	}
	code, body := c.do("GET", "/api/session", "", nil)
	var s sessionBody
	if err := json.Unmarshal([]byte(body), &s); err != nil || code != 200 || s.User != "operator-user" || s.Role != raftstore.RoleOperator || s.CSRF == "" {
		t.Fatalf("session: %d %s", code, body)
	}
	c.csrf = s.CSRF
	if code, body := c.do("POST", "/api/logout", "", nil); code != http.StatusNoContent {
		t.Fatalf("logout: %d %s", code, body)
	}
	if sessionCookie(t, c) != nil {
		t.Fatal("the session cookie is still set after logout")
	}
	code, body = c.do("GET", "/api/session", "", nil)
	wantError(t, code, body, 401, "Unauthenticated")
}

func TestLoginRefusesBadTokensAndTheClusterSecret(t *testing.T) {
	e := startEnv(t, nil)
	for _, tok := range []string{"tgu-not-a-token", clusterSecret} {
		code, body := e.client(t).do("POST", "/api/login", `{"token":"`+tok+`"}`, nil)
		wantError(t, code, body, 401, "Unauthenticated")
		if strings.Contains(body, tok) {
			t.Errorf("the refusal repeats the token: %s", body)
		}
	}
	code, body := e.client(t).do("POST", "/api/login", `not json`, nil)
	wantError(t, code, body, 400, "InvalidArgument")
}

func TestLoginIsRateLimitedPerAddress(t *testing.T) {
	e := startEnv(t, func(_ string, c *Config) { c.LoginsPerMinute = 3 })
	c := e.client(t)
	for i := range 3 {
		if code, _ := c.do("POST", "/api/login", `{"token":"wrong"}`, nil); code != 401 {
			t.Fatalf("attempt %d: %d, want 401", i+1, code)
		}
	}
	code, body := c.do("POST", "/api/login", `{"token":"`+bootToken+`"}`, nil)
	wantError(t, code, body, 429, "ResourceExhausted")
}

func TestPostWithoutTheCSRFTokenIsRefused(t *testing.T) {
	e := startEnv(t, nil)
	c := e.login(t, raftstore.RoleAdmin)
	wrong := "x" + c.csrf[1:]
	if wrong == c.csrf { // one token in 64 starts with x
		wrong = "y" + c.csrf[1:]
	}
	for name, hdr := range map[string]string{"missing": "", "wrong": wrong} {
		t.Run(name, func(t *testing.T) {
			h := map[string]string{"X-CSRF-Token": hdr}
			code, body := c.do("POST", "/api/rpc/tollgate.v1.TeamService/CreateTeam", `{"name":"t"}`, h)
			wantError(t, code, body, 403, "PermissionDenied", "X-CSRF-Token")
			code, body = c.do("POST", "/api/logout", "", h)
			wantError(t, code, body, 403, "PermissionDenied")
		})
	}
	if n := len(e.store.State().Teams()); n != 0 {
		t.Fatalf("%d teams created without the CSRF token", n)
	}
	// The token of another session does not do either.
	other := e.login(t, raftstore.RoleAdmin)
	code, body := c.do("POST", "/api/rpc/tollgate.v1.TeamService/CreateTeam", `{"name":"t"}`, map[string]string{"X-CSRF-Token": other.csrf})
	wantError(t, code, body, 403, "PermissionDenied")
}

func TestTamperedCookieIsRefused(t *testing.T) {
	e := startEnv(t, nil)
	c := e.login(t, raftstore.RoleViewer)
	ck := sessionCookie(t, c)
	body, mac, _ := strings.Cut(ck.Value, ".")
	b := []byte(body)
	b[len(b)/2] ^= 0x01
	u, _ := url.Parse(e.url)
	c.http.Jar.SetCookies(u, []*http.Cookie{{Name: SessionCookie, Value: string(b) + "." + mac, Path: "/"}})
	code, resp := c.do("GET", "/api/session", "", nil)
	wantError(t, code, resp, 401, "Unauthenticated")
	code, resp = c.rpc("tollgate.v1.TeamService/ListTeams", `{}`)
	wantError(t, code, resp, 401, "Unauthenticated")
}

func TestRevokedUsersSessionEndsAtOnce(t *testing.T) {
	e := startEnv(t, nil)
	c := e.login(t, raftstore.RoleViewer)
	if _, err := pb.NewUserServiceClient(e.admin).RevokeUser(bootCtx(t), &pb.RevokeUserRequest{Name: "viewer-user"}); err != nil {
		t.Fatal(err)
	}
	code, body := c.do("GET", "/api/session", "", nil)
	wantError(t, code, body, 401, "Unauthenticated")
	code, body = c.rpc("tollgate.v1.TeamService/ListTeams", `{}`)
	wantError(t, code, body, 401, "Unauthenticated")
}

func TestRPCBridgeActsWithTheUsersRole(t *testing.T) {
	e := startEnv(t, nil)
	viewer, op := e.login(t, raftstore.RoleViewer), e.login(t, raftstore.RoleOperator)
	code, body := viewer.rpc("tollgate.v1.KeyService/CreateKey", `{"name":"svc"}`)
	wantError(t, code, body, 403, "PermissionDenied", "keys.write", "viewer")
	code, body = op.rpc("tollgate.v1.KeyService/CreateKey", `{"name":"svc","budget":{"limit_nanos":"5000000","period":"month"}}`)
	var created struct {
		Key struct {
			ID     string `json:"id"`
			TeamID string `json:"team_id"`
			Budget struct {
				LimitNanos string `json:"limit_nanos"`
			} `json:"budget"`
		} `json:"key"`
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal([]byte(body), &created); err != nil || code != 200 || created.Secret == "" ||
		created.Key.Budget.LimitNanos != "5000000" || !strings.Contains(body, `"team_id":""`) {
		t.Fatalf("operator CreateKey: %d %s", code, body)
	}
	// The viewer lists it, with every field present and no secret.
	code, body = viewer.rpc("tollgate.v1.KeyService/ListKeys", `{"page_size":50}`)
	if code != 200 || !strings.Contains(body, created.Key.ID) || strings.Contains(body, created.Secret) ||
		!strings.Contains(body, `"next_page_token":""`) || !strings.Contains(body, `"total":1`) {
		t.Fatalf("viewer ListKeys: %d %s", code, body)
	}
	if r := e.store.State().AuditRecords(raftstore.AuditFilter{Limit: 1}); len(r) != 1 || r[0].GetUser() != "operator-user" ||
		!strings.HasPrefix(r[0].GetAddress(), "127.0.0.1:") {
		t.Fatalf("audit record of the console's CreateKey: %v", r)
	}
}

func TestInternalAndUnknownRPCsAreNotFound(t *testing.T) {
	e := startEnv(t, nil)
	c := e.login(t, raftstore.RoleAdmin)
	for _, m := range []string{"tollgate.v1.ClusterService/Propose", "tollgate.v1.ClusterService/WaitApplied",
		"tollgate.v1.ClusterService/SaveSnapshot", "tollgate.v1.SpendService/NodeLogs", "tollgate.v1.KeyService/Nope",
		"tollgate.v1.RaftService/Anything", "grpc.health.v1.Health/Check"} {
		code, body := c.rpc(m, `{}`)
		wantError(t, code, body, 404, "NotFound")
	}
	if code, body := c.rpc("tollgate.v1.ClusterService/Status", `{}`); code != 200 {
		t.Fatalf("Status: %d %s", code, body)
	}
}

func TestErrorsMapToHTTPStatuses(t *testing.T) {
	e := startEnv(t, nil)
	c := e.login(t, raftstore.RoleAdmin)
	code, body := c.rpc("tollgate.v1.KeyService/GetKey", `{"id":"key_nope"}`)
	wantError(t, code, body, 404, "NotFound", "key_nope")
	code, body = c.rpc("tollgate.v1.KeyService/GetKey", `{"idd":"x"}`)
	wantError(t, code, body, 400, "InvalidArgument")
	code, body = c.rpc("tollgate.v1.KeyService/CreateKey", `{"name":""}`)
	wantError(t, code, body, 400, "InvalidArgument")
	for c, want := range map[codes.Code]int{codes.InvalidArgument: 400, codes.Unauthenticated: 401, codes.PermissionDenied: 403,
		codes.NotFound: 404, codes.AlreadyExists: 409, codes.FailedPrecondition: 409, codes.ResourceExhausted: 429,
		codes.Unavailable: 503, codes.Internal: 500, codes.DeadlineExceeded: 500} {
		if got := httpStatus(c); got != want {
			t.Errorf("%v → %d, want %d", c, got, want)
		}
	}
}

func TestOversizedBodyIs413(t *testing.T) {
	e := startEnv(t, nil)
	c := e.login(t, raftstore.RoleAdmin)
	big := `{"name":"` + strings.Repeat("x", maxBody) + `"}`
	code, body := c.rpc("tollgate.v1.TeamService/CreateTeam", big)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "1 MiB") {
		t.Fatalf("oversized RPC body: %d %.200s", code, body)
	}
	code, _ = e.client(t).do("POST", "/api/login", `{"token":"`+strings.Repeat("x", maxBody)+`"}`, nil)
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized login body: %d", code)
	}
}

func TestSpendCSV(t *testing.T) {
	e := startEnv(t, nil)
	c := e.login(t, raftstore.RoleViewer)
	resp := c.raw("GET", "/api/spend.csv?by=model&since=0", "", nil)
	defer resp.Body.Close()
	buf := new(strings.Builder)
	_, _ = io.Copy(buf, resp.Body)
	want := "model,requests,prompt_tokens,completion_tokens,cached_tokens,cache_write_tokens,cost_usd,unpriced_requests\n" +
		"gpt-4o,3,30,12,0,0,0.001250,0\n" +
		"'=cmd(),1,0,0,0,0,2.000000,0\n" +
		"total,4,30,12,0,0,2.001250,0\n"
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") || buf.String() != want {
		t.Fatalf("CSV: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), buf.String())
	}
	code, body := c.do("GET", "/api/spend.csv?since=yesterday", "", nil)
	wantError(t, code, body, 400, "InvalidArgument")
	code, body = e.client(t).do("GET", "/api/spend.csv", "", nil)
	wantError(t, code, body, 401, "Unauthenticated")
}

func TestStaticUIAndSecurityHeaders(t *testing.T) {
	e := startEnv(t, nil)
	e.srv.ui = fstest.MapFS{
		"index.html": {Data: []byte("<!doctype html><title>Tollgate</title>")},
		"app.js":     {Data: []byte("export {};")},
		"style.css":  {Data: []byte("body{}")},
	}
	c := e.client(t)
	for path, ctype := range map[string]string{"/": "text/html", "/app.js": "text/javascript", "/style.css": "text/css",
		"/keys/deep/link": "text/html"} {
		resp := c.raw("GET", path, "", nil)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) {
			t.Errorf("GET %s: %d %s, want %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), ctype)
		}
		if resp.Header.Get("Content-Security-Policy") != "default-src 'self'" || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: security headers %v", path, resp.Header)
		}
	}
	// A file comes with a validator, and the same file again is a 304
	// without a body; a changed file (another ETag) is sent whole.
	first := c.raw("GET", "/app.js", "", nil)
	first.Body.Close()
	etag := first.Header.Get("ETag")
	if etag == "" || first.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("GET /app.js: ETag %q, Cache-Control %q", etag, first.Header.Get("Cache-Control"))
	}
	again := c.raw("GET", "/app.js", "", map[string]string{"If-None-Match": etag})
	b304, _ := io.ReadAll(again.Body)
	again.Body.Close()
	if again.StatusCode != http.StatusNotModified || len(b304) != 0 {
		t.Errorf("GET /app.js with its ETag: %d, %d bytes, want 304 and none", again.StatusCode, len(b304))
	}
	other := c.raw("GET", "/style.css", "", map[string]string{"If-None-Match": etag})
	other.Body.Close()
	if other.StatusCode != http.StatusOK || other.Header.Get("ETag") == etag {
		t.Errorf("GET /style.css with app.js's ETag: %d %q, want 200 and its own ETag", other.StatusCode, other.Header.Get("ETag"))
	}
	resp := c.raw("GET", "/api/config", "", nil)
	defer resp.Body.Close()
	var cfg map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&cfg)
	if resp.Header.Get("Cache-Control") != "no-store" || cfg["oidc"] != false || cfg["node"] != "n1" {
		t.Fatalf("/api/config: %v %v", resp.Header, cfg)
	}
	code, body := c.do("GET", "/api/nothing", "", nil)
	wantError(t, code, body, 404, "NotFound")
	code, body = c.do("GET", "/api/oidc/login", "", nil)
	wantError(t, code, body, 404, "NotFound", "single sign-on")
}
