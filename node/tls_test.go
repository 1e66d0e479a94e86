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
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate/tollgate/node/certs"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
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
	pair, err := ca.IssueTLS(name, []string{"127.0.0.1"}, time.Hour)
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

	t.Run("raft takes only members whose certificate names them", func(t *testing.T) {
		// Members that have the gossip key (it may leak) but whose Raft
		// address does not answer with a certificate naming them.
		plain, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		misnamed, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{issuePair(t, ca, "somebody")}})
		if err != nil {
			t.Fatal(err)
		}
		defer misnamed.Close()
		for _, ln := range []net.Listener{plain, misnamed} {
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
				}
			}()
		}
		leader, err := agreedLeader(nodes)
		if err != nil {
			t.Fatal(err)
		}
		var fakes []*memberlist.Memberlist
		// evil3 names a member's Raft address in another spelling, under
		// a name every node certificate holds as a DNS name.
		_, followerPort, _ := net.SplitHostPort(follower.n.Store().Addr())
		for id, raftAddr := range map[string]string{"evil1": plain.Addr().String(), "evil2": misnamed.Addr().String(),
			"localhost": net.JoinHostPort("::ffff:127.0.0.1", followerPort)} {
			ml := fakeMember(t, id, raftAddr, gossipKey)
			// Joined through the leader itself: it learns of them at once,
			// not by gossip that may take a push/pull round to reach it.
			if _, err := ml.Join([]string{leader.gossipAddr()}); err != nil {
				t.Fatalf("%s joins gossip with the key: %v", id, err)
			}
			fakes = append(fakes, ml)
		}
		eventually(t, 10*time.Second, "the leader to see the fake members", func() error {
			l, err := agreedLeader(nodes)
			if err != nil {
				return err
			}
			for _, id := range []string{"evil1", "evil2", "localhost"} {
				if m, ok := l.n.gossip.snapshot()[id]; !ok || !m.parsed {
					return fmt.Errorf("%s not in gossip", id)
				}
			}
			return nil
		})
		time.Sleep(3*reconcileInterval + probeTimeout)
		srvs, err := nodes[0].n.Store().Servers()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range srvs {
			if strings.HasPrefix(s.ID, "evil") || s.ID == "localhost" {
				t.Errorf("raft took %s at %s", s.ID, s.Address)
			}
		}
		// Probing never holds the caller: a silent address answers false
		// at once, while its probe runs in the background.
		silent, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		start := time.Now()
		for range 3 {
			if leader.n.probeOK("quiet", silent.Addr().String()) {
				t.Error("a silent address passed the probe")
			}
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("probeOK held its caller %v", d)
		}
		for _, ml := range fakes {
			_ = ml.Leave(time.Second)
			_ = ml.Shutdown()
		}

		// A real node with its own certificate joins.
		cfg := baseConfig(t, "n4", testLogger(t))
		cfg.Join = []string{nodes[0].gossipAddr()}
		cfg.TLSCert, cfg.TLSKey = issueFiles(t, ca, dir, "n4")
		cfg.TLSCA, cfg.HTTPTLS, cfg.GossipKey = caFile, true, gossipKey
		n4 := startNode(t, cfg)
		waitCluster(t, append(slices.Clone(nodes), n4), 4, 0)
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

// fakeMember is a bare memberlist member that gossips Tollgate metadata
// naming raftAddr as its Raft address.
func fakeMember(t *testing.T, id, raftAddr string, key []byte) *memberlist.Memberlist {
	t.Helper()
	meta, err := json.Marshal(memberMeta{ID: id, HTTP: "127.0.0.1:1", Admin: "127.0.0.1:1", Raft: raftAddr})
	if err != nil {
		t.Fatal(err)
	}
	mc := memberlist.DefaultLocalConfig()
	mc.Name = id
	mc.BindAddr, mc.BindPort = "127.0.0.1", freePort(t, true)
	mc.SecretKey = key
	mc.Delegate = metaDelegate(meta)
	mc.LogOutput = testWriter{t}
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	return ml
}

type metaDelegate []byte

func (d metaDelegate) NodeMeta(int) []byte           { return d }
func (metaDelegate) NotifyMsg([]byte)                {}
func (metaDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (metaDelegate) LocalState(bool) []byte          { return nil }
func (metaDelegate) MergeRemoteState([]byte, bool)   {}

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
	if _, err := ParseGossipKey(base64.StdEncoding.EncodeToString(make([]byte, 8))); err == nil || !strings.Contains(err.Error(), "want 16, 24 or 32") {
		t.Errorf("8-byte gossip key: %v", err)
	}
	if _, err := ParseSecretsKey(base64.StdEncoding.EncodeToString(make([]byte, 16))); err == nil || !strings.Contains(err.Error(), "secrets key: 16 bytes; want 32") {
		t.Errorf("16-byte secrets key: %v", err)
	}
	if _, err := ParseGossipKey("not base64!"); err == nil {
		t.Error("accepted a key that is not base64")
	}
	if k, err := ParseGossipKey("  "); err != nil || k != nil {
		t.Errorf("empty key: %v, %v", k, err)
	}
}

// The node reads its TLS files again when they change: a reissued
// certificate and a CA bundle take effect without a restart, and files
// that do not load leave the previous ones in place.
func TestTLSReload(t *testing.T) {
	dir := t.TempDir()
	ca, caFile := testCA(t, dir)
	cfg := baseConfig(t, "solo", testLogger(t))
	cfg.TLSCert, cfg.TLSKey = issueFiles(t, ca, dir, "solo")
	cfg.TLSCA, cfg.HTTPTLS, cfg.GossipKey = caFile, true, bytes.Repeat([]byte{7}, 32)
	cfg.tlsReloadInterval = 100 * time.Millisecond
	tn := startNode(t, cfg)
	tn.waitReady(15 * time.Second)

	// serial dials addr verifying against roots and returns the serial of
	// the certificate presented.
	serial := func(addr string, roots *x509.CertPool, protos ...string) (string, error) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr,
			&tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: protos})
		if err != nil {
			return "", err
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
	}
	first, err := serial(tn.n.AdminAddr(), ca.Pool(), "h2")
	if err != nil {
		t.Fatal(err)
	}

	// A new CA: the CA file becomes a bundle of both, the node's
	// certificate comes from the new one. The watcher picks it up.
	ca2, err := certs.NewCA("second CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, append(ca.CertPEM(), ca2.CertPEM()...), 0o644); err != nil {
		t.Fatal(err)
	}
	issueFiles(t, ca2, dir, "solo")
	eventually(t, 10*time.Second, "the new certificate served", func() error {
		for _, addr := range []string{tn.n.AdminAddr(), tn.n.HTTPAddr()} {
			s, err := serial(addr, ca2.Pool())
			if err != nil {
				return err
			}
			if s == first {
				return fmt.Errorf("%s still serves serial %s", addr, s)
			}
		}
		return nil
	})
	// Raft takes clients of either CA of the bundle, and still no other.
	addr := tn.n.Store().Addr()
	for name, c := range map[string]*certs.CA{"old CA": ca, "new CA": ca2} {
		cfg := &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{issuePair(t, c, "n9")}}
		if err := raftProbe(addr, cfg); err != nil && !isTimeout(err) {
			t.Errorf("raft refused a client of the %s: %v", name, err)
		}
	}
	other, _ := testCA(t, t.TempDir())
	if err := raftProbe(addr, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{issuePair(t, other, "x")}}); err == nil || isTimeout(err) {
		t.Errorf("raft took a client of a third CA: %v", err)
	}

	// A reissued certificate with the old size and modification time
	// (cp -p, a restore) is still noticed.
	info, err := os.Stat(cfg.TLSCert)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := serial(tn.n.AdminAddr(), ca2.Pool(), "h2")
	if err != nil {
		t.Fatal(err)
	}
	issueFiles(t, ca2, dir, "solo")
	_ = os.Chtimes(cfg.TLSCert, info.ModTime(), info.ModTime())
	_ = os.Chtimes(cfg.TLSKey, info.ModTime(), info.ModTime())
	eventually(t, 10*time.Second, "the same-size, same-time certificate served", func() error {
		s, err := serial(tn.n.AdminAddr(), ca2.Pool(), "h2")
		if err != nil {
			return err
		}
		if s == prev {
			return errors.New("still the previous serial")
		}
		return nil
	})

	// Files that do not load: reload says so, the node keeps serving.
	before, err := serial(tn.n.AdminAddr(), ca2.Pool(), "h2")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.TLSCert, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, err := tn.n.tls.reload(); ok || err == nil {
		t.Errorf("reload of a broken certificate: %v, %v", ok, err)
	}
	if s, err := serial(tn.n.AdminAddr(), ca2.Pool(), "h2"); err != nil || s != before {
		t.Errorf("after a failed reload: serial %s (was %s), %v", s, before, err)
	}
	if _, err := tn.keys().ListKeys(adminCtx(t), &pb.ListKeysRequest{}); err != nil {
		t.Errorf("admin API after a failed reload: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestCanonicalAddr(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:4200":          "127.0.0.1:4200",
		"[::ffff:127.0.0.1]:4200": "127.0.0.1:4200",
		"[::1]:4200":              "[::1]:4200",
		"[0:0:0:0:0:0:0:1]:4200":  "[::1]:4200",
		"Node-1.Internal:4200":    "node-1.internal:4200",
	} {
		if got := canonicalAddr(in); got != want {
			t.Errorf("canonicalAddr(%q) = %q, want %q", in, got, want)
		}
	}
	servers := []raftstore.Server{{ID: "n1", Address: "127.0.0.1:4201"}, {ID: "n2", Address: "127.0.0.1:4202"}}
	if got := addrOwner(servers, canonicalAddr("[::ffff:127.0.0.1]:4202")); got != "n2" {
		t.Errorf("addrOwner of n2's address in IPv6 form = %q", got)
	}
	if got := addrOwner(servers, "127.0.0.1:4203"); got != "" {
		t.Errorf("addrOwner of a free address = %q", got)
	}
}
