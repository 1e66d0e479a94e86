package node

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate/tollgate/node/certs"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// testCA writes a fresh CA to dir and returns it with its file.
func testCA(t *testing.T, dir string) (*certs.CA, string) {
	t.Helper()
	ca, err := certs.NewCA("tollgate test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(f, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	return ca, f
}

// issueFiles writes a certificate for name (valid for 127.0.0.1) and
// its key to dir.
func issueFiles(t *testing.T, ca *certs.CA, dir, name string) (certFile, keyFile string) {
	t.Helper()
	c, k, err := ca.Issue(name, []string{"127.0.0.1", "localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certFile, c, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, k, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func issuePair(t *testing.T, ca *certs.CA, name string) tls.Certificate {
	t.Helper()
	c, k, err := ca.Issue(name, []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// A cluster with TLS and a gossip key forms, replicates, forwards writes
// and serves the data plane over TLS; the Raft port refuses peers without
// a certificate of the cluster CA, the admin API refuses plain-text
// clients, and gossip refuses members without the key.
func TestClusterTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node")
	}
	t.Parallel()
	dir := t.TempDir()
	ca, caFile := testCA(t, dir)
	gossipKey := make([]byte, 32)
	_, _ = rand.Read(gossipKey)
	nodes := startCluster(t, 3, func(c *Config) {
		c.TLSCert, c.TLSKey = issueFiles(t, ca, dir, c.NodeID)
		c.TLSCA, c.HTTPTLS, c.GossipKey = caFile, true, gossipKey
	})
	var follower *tnode
	for _, tn := range nodes {
		if !tn.n.Store().IsLeader() {
			follower = tn
		}
	}

	// A write through a follower is forwarded to the leader over TLS and
	// returns once every node applied it through Raft over TLS.
	resp, err := follower.keys().CreateKey(adminCtx(t), &pb.CreateKeyRequest{Name: "tls", Models: []string{"demo"}})
	if err != nil {
		t.Fatalf("CreateKey through follower %s: %v", follower.id, err)
	}
	for _, tn := range nodes {
		if tn.n.Store().State().Key(resp.GetKey().GetId()) == nil {
			t.Errorf("%s has not applied the key", tn.id)
		}
	}

	// The data plane over TLS, verified against the cluster CA.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: nodes[0].clientTLS()}}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest("POST", nodes[0].httpURL()+"/v1/chat/completions",
		strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+resp.GetSecret())
	hr, err := hc.Do(req)
	if err != nil {
		t.Fatalf("chat over TLS: %v", err)
	}
	_ = hr.Body.Close()
	if hr.StatusCode != 200 || hr.TLS == nil {
		t.Errorf("chat over TLS: status %d, TLS %v", hr.StatusCode, hr.TLS != nil)
	}
	plain := http.Client{Timeout: 5 * time.Second}
	if pr, err := plain.Get("http://" + nodes[0].n.HTTPAddr() + "/readyz"); err == nil {
		_ = pr.Body.Close()
		if pr.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP to the TLS data plane answered 200")
		}
	}

	t.Run("admin API refuses plain text", func(t *testing.T) {
		conn, err := grpc.NewClient(nodes[0].n.AdminAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := pb.NewKeyServiceClient(conn).ListKeys(tokenCtx(t, testAdminToken, 3*time.Second), &pb.ListKeysRequest{}); err == nil {
			t.Fatal("ListKeys over plain text succeeded")
		}
	})

	t.Run("raft refuses peers without a cluster certificate", func(t *testing.T) {
		addr := nodes[0].n.Store().Addr()
		other, _ := testCA(t, t.TempDir())
		base := &tls.Config{InsecureSkipVerify: true}
		noCert := base.Clone()
		foreign := base.Clone()
		foreign.Certificates = []tls.Certificate{issuePair(t, other, "intruder")}
		member := base.Clone()
		member.Certificates = []tls.Certificate{issuePair(t, ca, "n9")}
		for _, c := range []struct {
			name   string
			cfg    *tls.Config
			refuse bool
		}{{"no certificate", noCert, true}, {"another CA's certificate", foreign, true}, {"cluster certificate", member, false}} {
			err := raftProbe(addr, c.cfg)
			var ne net.Error
			refused := err != nil && !(errors.As(err, &ne) && ne.Timeout())
			if refused != c.refuse {
				t.Errorf("%s: refused = %v (%v), want %v", c.name, refused, err, c.refuse)
			}
		}
		// Plain TCP speaking Raft's framing is not understood either.
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, _ = conn.Write(bytes.Repeat([]byte{0}, 64))
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := conn.Read(make([]byte, 1))
		if err == nil || n > 0 {
			t.Errorf("plain TCP to the Raft port: read %d bytes, err %v; want the connection dropped", n, err)
		}
	})

	t.Run("gossip refuses members without the key", func(t *testing.T) {
		wrong := make([]byte, 32)
		_, _ = rand.Read(wrong)
		for _, key := range [][]byte{nil, wrong} {
			mc := memberlist.DefaultLocalConfig()
			mc.Name = "intruder"
			mc.BindAddr, mc.BindPort = "127.0.0.1", freePort(t, true)
			mc.SecretKey = key
			mc.LogOutput = testWriter{t}
			ml, err := memberlist.Create(mc)
			if err != nil {
				t.Fatal(err)
			}
			n, err := ml.Join([]string{nodes[0].gossipAddr()})
			_ = ml.Shutdown()
			if err == nil || n > 0 {
				t.Errorf("join with key %x: joined %d, err %v; want refused", key, n, err)
			}
		}
		for _, tn := range nodes {
			if _, ok := tn.n.gossip.snapshot()["intruder"]; ok {
				t.Errorf("%s lists the intruder as a member", tn.id)
			}
		}
	})
}

// raftProbe opens a TLS connection to a Raft port and reads from it: a
// connection the server keeps open times out (it waits for an RPC); a
// refused client certificate ends it with an alert.
func raftProbe(addr string, cfg *tls.Config) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	_, err = conn.Read(make([]byte, 1))
	return err
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestLoadClusterTLSErrors(t *testing.T) {
	dir := t.TempDir()
	ca, caFile := testCA(t, dir)
	cert, key := issueFiles(t, ca, dir, "n1")
	other, _ := testCA(t, t.TempDir())
	ocert, okey := issueFiles(t, other, t.TempDir(), "x")
	for _, c := range []struct {
		cert, key, ca, want string
	}{
		{cert, "", caFile, "needs all of"},
		{"", "", caFile, "needs all of"},
		{cert, key, filepath.Join(dir, "missing.pem"), "read --tls-ca"},
		{cert, key, key, "holds no PEM certificate"},
		{ocert, okey, caFile, "not a server and client certificate of the cluster CA"},
		{cert, okey, caFile, "load --tls-cert"},
	} {
		_, err := loadClusterTLS(c.cert, c.key, c.ca)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("loadClusterTLS(%q, %q, %q) = %v; want %q", c.cert, c.key, c.ca, err, c.want)
		}
	}
	if tc, err := loadClusterTLS(cert, key, caFile); err != nil || tc == nil {
		t.Fatalf("valid files: %v", err)
	}
	if tc, err := loadClusterTLS("", "", ""); err != nil || tc != nil {
		t.Fatalf("no TLS: %v, %v", tc, err)
	}
	// A certificate good for one usage only is refused at start, not at
	// the first connection that needs the other.
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		c, k := issueWithUsage(t, ca, dir, u)
		if _, err := loadClusterTLS(c, k, caFile); err == nil || !strings.Contains(err.Error(), "not a server and client certificate") {
			t.Errorf("certificate with usage %v only: %v", u, err)
		}
	}
	// A node refuses to start with --http-tls but no certificate, and
	// with TLS but no gossip key (membership comes from gossip).
	cfg := baseConfig(t, "n1", testLogger(t))
	cfg.HTTPTLS = true
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "--http-tls needs") {
		t.Errorf("New with --http-tls alone: %v", err)
	}
	cfg = baseConfig(t, "n1", testLogger(t))
	cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = cert, key, caFile
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "gossip key") {
		t.Errorf("New with TLS but no gossip key: %v", err)
	}
}

// issueWithUsage writes a certificate of ca with the one extended key
// usage u.
func issueWithUsage(t *testing.T, ca *certs.CA, dir string, u x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	caKey, err := x509.ParsePKCS8PrivateKey(pemBlock(t, ca.KeyPEM()))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(u) + 100), Subject: pkix.Name{CommonName: "one-usage"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{u}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Certificate(), &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("usage-%d", u)
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func pemBlock(t *testing.T, b []byte) []byte {
	t.Helper()
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("no PEM block")
	}
	return blk.Bytes
}

func TestParseGossipKey(t *testing.T) {
	for n, ok := range map[int]bool{16: true, 24: true, 32: true, 8: false, 31: false, 64: false} {
		k := make([]byte, n)
		s := base64.StdEncoding.EncodeToString(k)
		got, err := ParseGossipKey(s)
		if (err == nil) != ok || (ok && len(got) != n) {
			t.Errorf("%d bytes: %d, %v", n, len(got), err)
		}
	}
	if _, err := ParseGossipKey("not base64!"); err == nil {
		t.Error("accepted a key that is not base64")
	}
	if k, err := ParseGossipKey("  "); err != nil || k != nil {
		t.Errorf("empty key: %v, %v", k, err)
	}
}
