package node

import (
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

// The console of a node calls the node's own admin server in memory, as
// the logged-in user: a write is audited with the user and the browser's
// address.
func TestConsoleServesTheNodesAdminAPI(t *testing.T) {
	cfg := baseConfig(t, "solo", testLogger(t))
	cfg.Console.Addr = "127.0.0.1:0"
	tn := startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	eventually(t, 10*time.Second, "the cluster secret", func() error {
		if tn.n.Store().State().ClusterSecret() == "" {
			return io.EOF
		}
		return nil
	})
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	base := "http://" + tn.n.ConsoleAddr()
	post := func(path, body, csrf string) (int, string) {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("X-CSRF-Token", csrf)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post("/api/login", `{"token":"`+testAdminToken+`"}`, "")
	var s struct{ User, Role, CSRF string }
	if err := json.Unmarshal([]byte(body), &s); err != nil || code != 200 || s.User != raftstore.BootstrapUser || s.Role != raftstore.RoleAdmin {
		t.Fatalf("login: %d %s", code, body)
	}
	code, body = post("/api/rpc/tollgate.v1.TeamService/CreateTeam", `{"name":"console-team"}`, s.CSRF)
	if code != 200 || !strings.Contains(body, `"name":"console-team"`) {
		t.Fatalf("CreateTeam: %d %s", code, body)
	}
	recs := tn.n.Store().State().AuditRecords(raftstore.AuditFilter{Limit: 1})
	if len(recs) != 1 || recs[0].GetUser() != raftstore.BootstrapUser || !strings.HasPrefix(recs[0].GetAddress(), "127.0.0.1:") {
		t.Fatalf("audit: %v", recs)
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
