package node

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/raftstore"
)

// startConsoleNode starts one node with a console (mod adjusts its
// configuration) and waits until it can sign sessions.
func startConsoleNode(t *testing.T, mod func(*Config)) *tnode {
	t.Helper()
	cfg := baseConfig(t, "solo", testLogger(t))
	cfg.Console.Addr = "127.0.0.1:0"
	if mod != nil {
		mod(&cfg)
	}
	tn := startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	eventually(t, 10*time.Second, "the cluster secret", func() error {
		if tn.n.Store().State().ClusterSecret() == "" {
			return io.EOF
		}
		return nil
	})
	return tn
}

// consolePost posts to the console with hc and returns the answer.
func consolePost(t *testing.T, hc *http.Client, url, body, csrf string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("X-CSRF-Token", csrf)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// checkConsoleWrite logs in to the console at base with the admin token,
// creates a team through the RPC bridge and finds it audited as the
// bootstrap user from the browser's address; it returns the login's
// answer.
func checkConsoleWrite(t *testing.T, tn *tnode, hc *http.Client, base string) *http.Response {
	t.Helper()
	login, body := consolePost(t, hc, base+"/api/login", `{"token":"`+testAdminToken+`"}`, "")
	var s struct{ User, Role, CSRF string }
	if err := json.Unmarshal([]byte(body), &s); err != nil || login.StatusCode != 200 || s.User != raftstore.BootstrapUser || s.Role != raftstore.RoleAdmin {
		t.Fatalf("login: %d %s", login.StatusCode, body)
	}
	resp, body := consolePost(t, hc, base+"/api/rpc/tollgate.v1.TeamService/CreateTeam", `{"name":"console-team"}`, s.CSRF)
	if resp.StatusCode != 200 || !strings.Contains(body, `"name":"console-team"`) {
		t.Fatalf("CreateTeam: %d %s", resp.StatusCode, body)
	}
	recs := tn.n.Store().State().AuditRecords(raftstore.AuditFilter{Limit: 1})
	if len(recs) != 1 || recs[0].GetUser() != raftstore.BootstrapUser || !strings.HasPrefix(recs[0].GetAddress(), "127.0.0.1:") {
		t.Fatalf("audit: %v", recs)
	}
	return login
}

// The console of a node calls the node's own admin server in memory, as
// the logged-in user: a write is audited with the user and the browser's
// address.
func TestConsoleServesTheNodesAdminAPI(t *testing.T) {
	tn := startConsoleNode(t, nil)
	jar, _ := cookiejar.New(nil)
	checkConsoleWrite(t, tn, &http.Client{Jar: jar, Timeout: 10 * time.Second}, "http://"+tn.n.ConsoleAddr())
}

// With the node's TLS files the console is served over TLS with the
// node's certificate, its cookie is Secure, and its in-memory calls to the
// admin server (which speaks TLS) work.
func TestConsoleOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caFile := testCA(t, dir)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	tn := startConsoleNode(t, func(c *Config) {
		c.TLSCert, c.TLSKey = issueFiles(t, ca, dir, c.NodeID)
		c.TLSCA, c.GossipKey = caFile, key
	})
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tn.clientTLS()}}
	defer hc.CloseIdleConnections()
	login := checkConsoleWrite(t, tn, hc, "https://"+tn.n.ConsoleAddr())
	if login.TLS == nil || len(login.Cookies()) != 1 || !login.Cookies()[0].Secure {
		t.Fatalf("login over TLS: TLS %v, cookies %v", login.TLS != nil, login.Cookies())
	}
	if r, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + tn.n.ConsoleAddr() + "/api/config"); err == nil {
		_ = r.Body.Close()
		if r.StatusCode == http.StatusOK {
			t.Fatal("the console answered plain HTTP")
		}
	}
}

// A console address in use fails New, unless the console is optional
// (the default address): then the node runs without one.
func TestConsoleAddressInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := baseConfig(t, "solo", testLogger(t))
	cfg.Console.Addr = busy.Addr().String()
	if n, err := New(cfg); err == nil || !strings.Contains(err.Error(), "console listen") {
		if n != nil {
			n.Close()
		}
		t.Fatalf("New with the console's address in use: %v", err)
	}
	cfg = baseConfig(t, "solo2", testLogger(t))
	cfg.Console = ConsoleConfig{Addr: busy.Addr().String(), Optional: true}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.ConsoleAddr() != "" {
		t.Fatalf("console at %s", n.ConsoleAddr())
	}
}

func TestConsoleURL(t *testing.T) {
	for addr, want := range map[string]string{"127.0.0.1:4400": "http://127.0.0.1:4400", "0.0.0.0:4400": "http://localhost:4400",
		"[::]:4400": "http://localhost:4400", "console.internal:443": "http://console.internal:443"} {
		if got := consoleURL(addr, false); got != want {
			t.Errorf("consoleURL(%q) = %q, want %q", addr, got, want)
		}
	}
	if got := consoleURL("10.0.0.5:4400", true); got != "https://10.0.0.5:4400" {
		t.Errorf("with TLS: %q", got)
	}
}
