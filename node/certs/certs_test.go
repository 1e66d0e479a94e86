package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

func newTestCA(t *testing.T) *CA {
	t.Helper()
	ca, err := NewCA("Test CA", 24*time.Hour)
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	return ca
}

func parseCertPEM(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		t.Fatalf("no CERTIFICATE PEM block in %q", data)
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatalf("parse certificate: %v", err)
	}
	return cert
}

// verify checks cert against pool for the given host and extended key
// usage.
func verify(cert *x509.Certificate, pool *x509.CertPool, host string, usage x509.ExtKeyUsage) error {
	_, err := cert.Verify(x509.VerifyOptions{
		Roots:     pool,
		DNSName:   host,
		KeyUsages: []x509.ExtKeyUsage{usage},
	})
	return err
}

func TestNewCA(t *testing.T) {
	before := time.Now()
	ca := newTestCA(t)
	c := ca.Certificate()
	if !c.IsCA || !c.BasicConstraintsValid {
		t.Errorf("IsCA=%v BasicConstraintsValid=%v, want both true", c.IsCA, c.BasicConstraintsValid)
	}
	if c.MaxPathLen != 0 || !c.MaxPathLenZero {
		t.Errorf("MaxPathLen=%d MaxPathLenZero=%v, want 0 and true", c.MaxPathLen, c.MaxPathLenZero)
	}
	if want := x509.KeyUsageCertSign | x509.KeyUsageCRLSign; c.KeyUsage != want {
		t.Errorf("KeyUsage=%v, want %v", c.KeyUsage, want)
	}
	if c.Subject.CommonName != "Test CA" {
		t.Errorf("CommonName=%q", c.Subject.CommonName)
	}
	if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v is not a positive 128-bit number", c.SerialNumber)
	}
	if !c.NotBefore.Before(before.Add(-50 * time.Minute)) {
		t.Errorf("NotBefore %v is not about an hour in the past", c.NotBefore)
	}
	if pub, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T is not ECDSA P-256", c.PublicKey)
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("CA is not self-signed: %v", err)
	}
	if b, _ := pem.Decode(ca.KeyPEM()); b == nil || b.Type != "PRIVATE KEY" {
		t.Errorf("KeyPEM is not a PKCS #8 PRIVATE KEY block")
	}
	other := newTestCA(t)
	if other.Certificate().SerialNumber.Cmp(c.SerialNumber) == 0 {
		t.Error("two CAs got the same serial number")
	}

	for _, tc := range []struct {
		name     string
		validity time.Duration
	}{{"", time.Hour}, {"x", 0}, {"x", -time.Hour}} {
		if _, err := NewCA(tc.name, tc.validity); err == nil {
			t.Errorf("NewCA(%q, %v) succeeded, want an error", tc.name, tc.validity)
		}
	}
}

func TestIssueVerifies(t *testing.T) {
	ca := newTestCA(t)
	certPEM, keyPEM, err := ca.Issue("node-1", []string{"node-1.example", "127.0.0.1", "::1", "node-1.example", " "}, time.Hour)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("issued certificate and key do not pair: %v", err)
	}
	leaf := parseCertPEM(t, certPEM)
	if got := leaf.DNSNames; len(got) != 1 || got[0] != "node-1.example" {
		t.Errorf("DNSNames=%v, want [node-1.example]", got)
	}
	if got := leaf.IPAddresses; len(got) != 2 || !got[0].Equal(net.IPv4(127, 0, 0, 1)) || !got[1].Equal(net.IPv6loopback) {
		t.Errorf("IPAddresses=%v, want [127.0.0.1 ::1]", got)
	}
	if leaf.IsCA {
		t.Error("leaf is a CA")
	}
	if leaf.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("KeyUsage=%v, want DigitalSignature", leaf.KeyUsage)
	}
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T is not ECDSA P-256", leaf.PublicKey)
	}

	pool := ca.Pool()
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		for _, host := range []string{"node-1.example", "127.0.0.1", "::1"} {
			if err := verify(leaf, pool, host, usage); err != nil {
				t.Errorf("verify usage %v host %s: %v", usage, host, err)
			}
		}
		if err := verify(leaf, pool, "other.example", usage); err == nil {
			t.Errorf("verify usage %v for a host not in the certificate succeeded", usage)
		}
	}

	if err := verify(leaf, newTestCA(t).Pool(), "node-1.example", x509.ExtKeyUsageServerAuth); err == nil {
		t.Error("certificate verified against a different CA")
	}
}

func TestIssueValidity(t *testing.T) {
	ca, err := NewCA("Short CA", 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := ca.Issue("n", nil, 1000*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf := parseCertPEM(t, certPEM)
	if !leaf.NotAfter.Equal(ca.Certificate().NotAfter) {
		t.Errorf("NotAfter %v, want capped at the CA's %v", leaf.NotAfter, ca.Certificate().NotAfter)
	}
	if leaf.NotBefore.Before(ca.Certificate().NotBefore) {
		t.Errorf("NotBefore %v is before the CA's %v", leaf.NotBefore, ca.Certificate().NotBefore)
	}
	for _, tc := range []struct {
		name     string
		validity time.Duration
	}{{"", time.Hour}, {"n", 0}} {
		if _, _, err := ca.Issue(tc.name, nil, tc.validity); err == nil {
			t.Errorf("Issue(%q, %v) succeeded, want an error", tc.name, tc.validity)
		}
	}
}

func TestLoadCARoundTrip(t *testing.T) {
	orig := newTestCA(t)
	loaded, err := LoadCA(orig.CertPEM(), orig.KeyPEM())
	if err != nil {
		t.Fatalf("LoadCA: %v", err)
	}
	if string(loaded.CertPEM()) != string(orig.CertPEM()) || string(loaded.KeyPEM()) != string(orig.KeyPEM()) {
		t.Error("loaded CA's PEM differs from the original's")
	}
	certPEM, _, err := loaded.Issue("node-2", []string{"node-2"}, time.Hour)
	if err != nil {
		t.Fatalf("Issue with the loaded CA: %v", err)
	}
	if err := verify(parseCertPEM(t, certPEM), orig.Pool(), "node-2", x509.ExtKeyUsageClientAuth); err != nil {
		t.Errorf("certificate of the loaded CA does not verify against the original: %v", err)
	}

	// A SEC 1 "EC PRIVATE KEY" loads too.
	key := orig.key.(*ecdsa.PrivateKey)
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	if _, err := LoadCA(orig.CertPEM(), ecPEM); err != nil {
		t.Errorf("LoadCA with an EC PRIVATE KEY: %v", err)
	}
}

func TestLoadCARejects(t *testing.T) {
	ca := newTestCA(t)
	leafPEM, leafKeyPEM, err := ca.Issue("leaf", []string{"leaf"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// A self-signed certificate without the CA basic constraint.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "not a CA"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	selfPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	selfKeyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	selfKeyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: selfKeyDER})

	for _, tc := range []struct {
		name          string
		cert, key     []byte
		wantSubstring string
	}{
		{"leaf certificate", leafPEM, leafKeyPEM, "not a CA"},
		{"self-signed non-CA", selfPEM, selfKeyPEM, "not a CA"},
		{"key of another CA", ca.CertPEM(), newTestCA(t).KeyPEM(), "does not match"},
		{"leaf key", ca.CertPEM(), leafKeyPEM, "does not match"},
		{"no certificate", nil, ca.KeyPEM(), "no CERTIFICATE"},
		{"no key", ca.CertPEM(), ca.CertPEM(), "PRIVATE KEY"},
		{"garbage certificate", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("x")}), ca.KeyPEM(), "parse CA certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadCA(tc.cert, tc.key)
			if err == nil || !strings.Contains(err.Error(), tc.wantSubstring) {
				t.Errorf("LoadCA error %v, want one containing %q", err, tc.wantSubstring)
			}
		})
	}
}

// TestMutualTLS runs real TLS handshakes over loopback with client
// certificates required and verified against the CA.
func TestMutualTLS(t *testing.T) {
	ca := newTestCA(t)
	pair := func(name string) tls.Certificate {
		c, err := ca.IssueTLS(name, []string{name, "127.0.0.1"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	serverCert, clientCert := pair("server"), pair("client")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	serverConf := &tls.Config{
		Certificates: []tls.Certificate{serverCert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
		MinVersion:   tls.VersionTLS12,
	}

	// serve handles one connection: it completes the handshake, then
	// echoes the client's peer name, and reports the handshake's outcome.
	serve := func() <-chan error {
		done := make(chan error, 1)
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				done <- err
				return
			}
			defer conn.Close()
			if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
				done <- err
				return
			}
			tc := tls.Server(conn, serverConf)
			if err := tc.Handshake(); err != nil {
				done <- err
				return
			}
			peers := tc.ConnectionState().PeerCertificates
			if len(peers) == 0 {
				done <- errors.New("no client certificate")
				return
			}
			_, err = io.WriteString(tc, peers[0].Subject.CommonName+"\n")
			done <- err
		}()
		return done
	}

	dial := func(conf *tls.Config) (string, error) {
		conn, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		if err != nil {
			return "", err
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return "", err
		}
		tc := tls.Client(conn, conf)
		if err := tc.Handshake(); err != nil {
			return "", err
		}
		buf := make([]byte, 64)
		n, err := tc.Read(buf)
		return string(buf[:n]), err
	}

	waitServer := func(t *testing.T, done <-chan error) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(15 * time.Second):
			t.Fatal("server did not finish")
			return nil
		}
	}

	t.Run("client certificate", func(t *testing.T) {
		done := serve()
		got, err := dial(&tls.Config{
			Certificates: []tls.Certificate{clientCert},
			RootCAs:      ca.Pool(),
			ServerName:   "server",
			MinVersion:   tls.VersionTLS12,
		})
		if err != nil {
			t.Fatalf("client: %v", err)
		}
		if got != "client\n" {
			t.Errorf("server saw client %q, want %q", got, "client\n")
		}
		if err := waitServer(t, done); err != nil {
			t.Errorf("server: %v", err)
		}
	})

	t.Run("by IP address", func(t *testing.T) {
		done := serve()
		if _, err := dial(&tls.Config{
			Certificates: []tls.Certificate{clientCert},
			RootCAs:      ca.Pool(),
			ServerName:   "127.0.0.1",
			MinVersion:   tls.VersionTLS12,
		}); err != nil {
			t.Fatalf("client: %v", err)
		}
		if err := waitServer(t, done); err != nil {
			t.Errorf("server: %v", err)
		}
	})

	t.Run("no client certificate", func(t *testing.T) {
		done := serve()
		if _, err := dial(&tls.Config{
			RootCAs:    ca.Pool(),
			ServerName: "server",
			MinVersion: tls.VersionTLS12,
		}); err == nil {
			t.Error("client without a certificate was served")
		}
		if err := waitServer(t, done); err == nil {
			t.Error("server accepted a client without a certificate")
		}
	})

	t.Run("client certificate of another CA", func(t *testing.T) {
		otherCertPEM, otherKeyPEM, err := newTestCA(t).Issue("client", []string{"client"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		other, err := tls.X509KeyPair(otherCertPEM, otherKeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		done := serve()
		if _, err := dial(&tls.Config{
			Certificates: []tls.Certificate{other},
			RootCAs:      ca.Pool(),
			ServerName:   "server",
			MinVersion:   tls.VersionTLS12,
		}); err == nil {
			t.Error("client with a certificate of another CA was served")
		}
		if err := waitServer(t, done); err == nil {
			t.Error("server accepted a certificate of another CA")
		}
	})

	t.Run("server of another CA", func(t *testing.T) {
		done := serve()
		if _, err := dial(&tls.Config{
			Certificates: []tls.Certificate{clientCert},
			RootCAs:      newTestCA(t).Pool(),
			ServerName:   "server",
			MinVersion:   tls.VersionTLS12,
		}); err == nil {
			t.Error("client accepted a server certificate of another CA")
		}
		// The server sees the client abort the handshake.
		if err := waitServer(t, done); err == nil {
			t.Error("server completed a handshake the client rejected")
		}
	})
}
