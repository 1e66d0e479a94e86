package node

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/node/console"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// consoleGet gets url with the session cookie value and returns the answer.
func consoleGet(t *testing.T, url, cookie string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.AddCookie(&http.Cookie{Name: console.SessionCookie, Value: cookie})
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// consoleLogin logs in to the console at base with token and returns the
// browser (its cookie jar holds the session) and the session's CSRF token.
func consoleLogin(t *testing.T, base, token string) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 15 * time.Second}
	resp, body := consolePost(t, hc, base+"/api/login", `{"token":"`+token+`"}`, "")
	var s struct{ CSRF string }
	if err := json.Unmarshal([]byte(body), &s); err != nil || resp.StatusCode != 200 {
		t.Fatalf("login at %s: %d %s", base, resp.StatusCode, body)
	}
	return hc, s.CSRF
}

// A logout on one node's console ends the session on every node: a copy
// of the cookie saved before is refused by another node's console as
// soon as the logout has answered, for a user's session and the bootstrap
// token's alike.
func TestLogoutOnOneNodeEndsTheSessionOnEveryNode(t *testing.T) {
	nodes := startCluster(t, 3, func(c *Config) { c.Console.Addr = "127.0.0.1:0" })
	leader := waitCluster(t, nodes, 3, 0)
	followers := without(nodes, leader)
	olga, err := pb.NewUserServiceClient(leader.grpcConn()).CreateUser(adminCtx(t), &pb.CreateUserRequest{Name: "olga", Role: raftstore.RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the user and the cluster secret on every node", func() error {
		for _, tn := range nodes {
			if st := tn.n.Store().State(); st.ClusterSecret() == "" || st.User("olga") == nil {
				return fmt.Errorf("not yet on %s", tn.cfg.NodeID)
			}
		}
		return nil
	})
	// Log in on a follower (its logout is forwarded to the leader), check
	// the saved cookie on the other follower and on the leader.
	at, elsewhere := followers[0], []*tnode{followers[1], leader}
	for user, token := range map[string]string{"olga": olga.GetToken(), raftstore.BootstrapUser: testAdminToken} {
		t.Run(user, func(t *testing.T) {
			base := "http://" + at.n.ConsoleAddr()
			hc, csrf := consoleLogin(t, base, token)
			u, _ := url.Parse(base)
			saved := hc.Jar.Cookies(u)[0].Value
			for _, tn := range elsewhere {
				if code, body := consoleGet(t, "http://"+tn.n.ConsoleAddr()+"/api/session", saved); code != 200 {
					t.Fatalf("the session on %s before logout: %d %s", tn.cfg.NodeID, code, body)
				}
			}
			if resp, body := consolePost(t, hc, base+"/api/logout", "", csrf); resp.StatusCode != http.StatusNoContent {
				t.Fatalf("logout: %d %s", resp.StatusCode, body)
			}
			for _, tn := range append(elsewhere, at) {
				code, body := consoleGet(t, "http://"+tn.n.ConsoleAddr()+"/api/session", saved)
				if code != http.StatusUnauthorized || !strings.Contains(body, `"Unauthenticated"`) || !strings.Contains(body, "logged out") {
					t.Fatalf("the saved cookie on %s after logout: %d %s", tn.cfg.NodeID, code, body)
				}
			}
		})
	}
}

// startConsoleCluster starts three nodes with consoles and returns them
// and the leader once every node holds the cluster secret.
func startConsoleCluster(t *testing.T) ([]*tnode, *tnode) {
	t.Helper()
	nodes := startCluster(t, 3, func(c *Config) { c.Console.Addr = "127.0.0.1:0" })
	leader := waitCluster(t, nodes, 3, 0)
	eventually(t, 10*time.Second, "the cluster secret on every node", func() error {
		for _, tn := range nodes {
			if tn.n.Store().State().ClusterSecret() == "" {
				return fmt.Errorf("not yet on %s", tn.cfg.NodeID)
			}
		}
		return nil
	})
	return nodes, leader
}

// consoleBrowser is a browser holding the session cookie value for the
// console at base.
func consoleBrowser(t *testing.T, base, cookie string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	u, _ := url.Parse(base)
	jar.SetCookies(u, []*http.Cookie{{Name: console.SessionCookie, Value: cookie, Path: "/"}})
	return &http.Client{Jar: jar, Timeout: 15 * time.Second}
}

// A logout retried after the leader changed (the first attempt was
// applied, its answer lost: the browser kept the cookie) answers as the
// first did, on the node it was sent to and on the new leader, and the
// session stays ended everywhere.
func TestLogoutRetriedAfterALeaderChangeAnswersAsTheFirst(t *testing.T) {
	nodes, old := startConsoleCluster(t)
	survivors := without(nodes, old)
	base := "http://" + survivors[0].n.ConsoleAddr()
	hc, csrf := consoleLogin(t, base, testAdminToken)
	u, _ := url.Parse(base)
	saved := hc.Jar.Cookies(u)[0].Value
	if resp, body := consolePost(t, hc, base+"/api/logout", "", csrf); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("logout: %d %s", resp.StatusCode, body)
	}
	old.crash()
	eventually(t, 10*time.Second, "a new leader among the survivors", func() error {
		_, err := agreedLeader(survivors)
		return err
	})
	for _, tn := range survivors {
		at := "http://" + tn.n.ConsoleAddr()
		// The crashed leader may be named as lagging: the new one cannot
		// hear from it.
		resp, body := consolePost(t, consoleBrowser(t, at, saved), at+"/api/logout", "", csrf)
		if resp.StatusCode != http.StatusNoContent && (resp.StatusCode != http.StatusOK || !strings.Contains(body, `"lagging":["`+old.cfg.NodeID+`"]`)) {
			t.Fatalf("the logout retried on %s after the leader changed: %d %s", tn.cfg.NodeID, resp.StatusCode, body)
		}
		code, body := consoleGet(t, at+"/api/session", saved)
		if code != http.StatusUnauthorized || !strings.Contains(body, "logged out") {
			t.Fatalf("the saved cookie on %s after the retried logout: %d %s", tn.cfg.NodeID, code, body)
		}
	}
}

// A logout on a node cut off from the rest (no leader can be elected)
// still clears the cookie, and answers that the session could not be
// ended on the server, in the console's JSON error format.
func TestLogoutWithoutALeaderClearsTheCookieAndSaysSo(t *testing.T) {
	nodes, leader := startConsoleCluster(t)
	alone := without(nodes, leader)[0]
	base := "http://" + alone.n.ConsoleAddr()
	hc, csrf := consoleLogin(t, base, testAdminToken)
	for _, tn := range without(nodes, alone) {
		tn.crash()
	}
	resp, body := consolePost(t, hc, base+"/api/logout", "", csrf)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"Unavailable"`) ||
		!strings.Contains(body, "could not be ended on the server") {
		t.Fatalf("logout without a leader: %d %s", resp.StatusCode, body)
	}
	u, _ := url.Parse(base)
	if c := hc.Jar.Cookies(u); len(c) != 0 {
		t.Fatalf("the session cookie is still set after the logout: %v", c)
	}
}
