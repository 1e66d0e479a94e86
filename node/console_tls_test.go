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

	"github.com/tollgate/tollgate/node/console"
)

// A node with a certificate serves its console over TLS only, marks the
// session cookie Secure, reaches its own admin server through the
// in-memory connection with the node's TLS credentials, and stops
// serving the console on Close.
func TestConsoleServedOverTLSUntilTheNodeCloses(t *testing.T) {
	dir := t.TempDir()
	ca, caFile := testCA(t, dir)
	cfg := baseConfig(t, "solo", testLogger(t))
	cfg.TLSCert, cfg.TLSKey = issueFiles(t, ca, dir, "solo")
	cfg.TLSCA, cfg.GossipKey = caFile, make([]byte, 32)
	cfg.Console.Addr = "127.0.0.1:0"
	tn := startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	eventually(t, 10*time.Second, "the cluster secret", func() error {
		if tn.n.Store().State().ClusterSecret() == "" {
			return io.EOF
		}
		return nil
	})
	addr := tn.n.ConsoleAddr()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tn.clientTLS()}}
	defer hc.CloseIdleConnections()
	post := func(path, body, csrf string) *http.Response {
		req, _ := http.NewRequest("POST", "https://"+addr+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", csrf)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post("/api/login", `{"token":"`+testAdminToken+`"}`, "")
	var s struct{ CSRF string }
	err := json.NewDecoder(resp.Body).Decode(&s)
	resp.Body.Close()
	var secure bool
	for _, c := range resp.Cookies() {
		secure = secure || (c.Name == console.SessionCookie && c.Secure)
	}
	if err != nil || resp.StatusCode != http.StatusOK || !secure {
		t.Fatalf("login over TLS: %d, Secure session cookie %v", resp.StatusCode, secure)
	}
	resp = post("/api/rpc/tollgate.v1.TeamService/CreateTeam", `{"name":"over-tls"}`, s.CSRF)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || tn.n.Store().State().Teams()[0].GetName() != "over-tls" {
		t.Fatalf("CreateTeam over TLS: %d", resp.StatusCode)
	}
	if pr, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/api/config"); err == nil {
		pr.Body.Close()
		if pr.StatusCode == http.StatusOK {
			t.Error("the console answered plain HTTP")
		}
	}
	tn.n.Close()
	if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		c.Close()
		t.Fatal("the console still accepts connections after Close")
	}
}
